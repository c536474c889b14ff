
DROP INDEX IF EXISTS runs_wake;
DROP INDEX IF EXISTS runs_lease;
CREATE INDEX runs_timer ON runs(wake_at) WHERE status = 'suspended';
CREATE INDEX runs_leased ON runs(lease_expires_at) WHERE status = 'running';
CREATE INDEX runs_open ON runs(status, workflow, created_at, id, version) WHERE (status = 'pending' OR status = 'running' OR status = 'suspended' OR status = 'paused');
