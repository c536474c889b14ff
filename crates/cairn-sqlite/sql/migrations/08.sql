
ALTER TABLE runs ADD COLUMN parent TEXT;
CREATE INDEX IF NOT EXISTS runs_parent ON runs(parent) WHERE parent IS NOT NULL;
