
CREATE INDEX IF NOT EXISTS runs_failed ON runs(workflow, created_at, id) WHERE status = 'failed';
CREATE INDEX IF NOT EXISTS runs_cancelled ON runs(workflow, created_at, id) WHERE status = 'cancelled';
CREATE INDEX IF NOT EXISTS runs_paused ON runs(workflow, created_at, id) WHERE status = 'paused';
