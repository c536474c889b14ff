
ALTER TABLE runs ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN fair_key TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN fair_seq INTEGER NOT NULL DEFAULT 0;
DROP INDEX IF EXISTS runs_ready;
CREATE INDEX runs_ready ON runs(priority DESC, fair_seq, created_at) WHERE status = 'pending' AND waiting_for IS NULL;
CREATE INDEX runs_fair ON runs(priority, fair_key, fair_seq) WHERE status = 'pending' AND waiting_for IS NULL;
