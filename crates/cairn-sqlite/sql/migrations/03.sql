
ALTER TABLE runs ADD COLUMN deadline_at INTEGER;
ALTER TABLE runs ADD COLUMN retention_ms INTEGER;
ALTER TABLE runs ADD COLUMN delete_after INTEGER;
ALTER TABLE runs ADD COLUMN restarted_from TEXT;
CREATE INDEX IF NOT EXISTS runs_delete_after ON runs(delete_after) WHERE delete_after IS NOT NULL;
CREATE INDEX IF NOT EXISTS runs_completed ON runs(completed_at) WHERE completed_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS runs_restarted_from ON runs(restarted_from) WHERE restarted_from IS NOT NULL;
