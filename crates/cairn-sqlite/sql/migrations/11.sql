
ALTER TABLE runs ADD COLUMN flow_key TEXT;
ALTER TABLE runs ADD COLUMN flow_hold INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN waiting_for TEXT;
CREATE INDEX IF NOT EXISTS runs_ready ON runs(created_at) WHERE status = 'pending' AND waiting_for IS NULL;
CREATE INDEX IF NOT EXISTS runs_waiting ON runs(workflow, flow_key, created_at, id) WHERE waiting_for IS NOT NULL;
CREATE TABLE IF NOT EXISTS concurrency_rules (
    workflow TEXT PRIMARY KEY NOT NULL,
    key TEXT,
    lim INTEGER NOT NULL,
    hold INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS concurrency_slots (
    workflow TEXT NOT NULL,
    key TEXT NOT NULL,
    held INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (workflow, key)
) WITHOUT ROWID;
CREATE VIEW IF NOT EXISTS flow_admit (workflow, key) AS SELECT NULL, NULL WHERE 0;
CREATE TRIGGER IF NOT EXISTS flow_admit INSTEAD OF INSERT ON flow_admit
BEGIN
    INSERT OR IGNORE INTO concurrency_slots (workflow, key, held) VALUES (new.workflow, new.key, 0);
    UPDATE runs SET waiting_for = NULL WHERE id IN (
        SELECT id FROM runs WHERE workflow = new.workflow AND flow_key = new.key AND waiting_for IS NOT NULL
        ORDER BY created_at, id
        LIMIT max(0, coalesce((SELECT lim FROM concurrency_rules WHERE workflow = new.workflow), 1000000000)
                     - (SELECT held FROM concurrency_slots WHERE workflow = new.workflow AND key = new.key)));
    UPDATE concurrency_slots SET held = held + changes() WHERE workflow = new.workflow AND key = new.key;
END;

CREATE TRIGGER IF NOT EXISTS runs_flow_insert AFTER INSERT ON runs WHEN new.flow_key IS NOT NULL
BEGIN
    INSERT INTO flow_admit (workflow, key) VALUES (new.workflow, new.flow_key);
END;
CREATE TRIGGER IF NOT EXISTS runs_flow_update AFTER UPDATE OF status, waiting_for ON runs
WHEN old.flow_key IS NOT NULL AND ((old.waiting_for IS NULL AND new.waiting_for IS NOT NULL)
    OR (old.waiting_for IS NULL AND (old.status IN ('pending', 'running') OR (old.status = 'suspended' AND old.flow_hold = 1))
        AND NOT (new.waiting_for IS NULL
                 AND (new.status IN ('pending', 'running') OR (new.status = 'suspended' AND new.flow_hold = 1)))))
BEGIN
    UPDATE concurrency_slots SET held = held - 1 WHERE workflow = old.workflow AND key = old.flow_key
        AND old.waiting_for IS NULL AND (old.status IN ('pending', 'running') OR (old.status = 'suspended' AND old.flow_hold = 1));
    INSERT INTO flow_admit (workflow, key) VALUES (old.workflow, old.flow_key);
END;
