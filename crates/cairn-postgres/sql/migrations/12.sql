ALTER TABLE {schema}.runs ADD COLUMN flow_key TEXT COLLATE "C", ADD COLUMN flow_hold BOOLEAN NOT NULL DEFAULT false,
        ADD COLUMN waiting_for TEXT;
    DROP INDEX {schema}.runs_pending;
    CREATE INDEX runs_pending ON {schema}.runs (created_at) WHERE status = 'pending' AND waiting_for IS NULL;
    CREATE INDEX runs_waiting ON {schema}.runs (workflow, flow_key, created_at, id) WHERE waiting_for IS NOT NULL;
    CREATE TABLE {schema}.concurrency_rules (
        workflow TEXT COLLATE "C" PRIMARY KEY,
        key TEXT,
        path TEXT[],
        lim INTEGER NOT NULL,
        hold BOOLEAN NOT NULL
    );
    CREATE TABLE {schema}.concurrency_slots (
        workflow TEXT COLLATE "C" NOT NULL,
        key TEXT COLLATE "C" NOT NULL,
        held INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (workflow, key)
    );
    CREATE FUNCTION {schema}.flow_admit(w TEXT, k TEXT) RETURNS void LANGUAGE plpgsql AS $$
    DECLARE free BIGINT;
    BEGIN
        INSERT INTO {schema}.concurrency_slots (workflow, key) VALUES (w, k) ON CONFLICT DO NOTHING;
        SELECT coalesce((SELECT lim FROM {schema}.concurrency_rules WHERE workflow = w), 1000000000) - held INTO free
            FROM {schema}.concurrency_slots WHERE workflow = w AND key = k FOR UPDATE;
        IF free > 0 THEN
            WITH admitted AS (
                UPDATE {schema}.runs SET waiting_for = NULL WHERE id IN (
                    SELECT id FROM {schema}.runs WHERE workflow = w AND flow_key = k AND waiting_for IS NOT NULL
                    ORDER BY created_at, id LIMIT free FOR UPDATE SKIP LOCKED)
                RETURNING 1)
            UPDATE {schema}.concurrency_slots SET held = held + (SELECT count(*) FROM admitted)
                WHERE workflow = w AND key = k;
        END IF;
    END $$;
    CREATE FUNCTION {schema}.flow_changed() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'UPDATE' AND OLD.waiting_for IS NULL
            AND (OLD.status IN ('pending', 'running') OR (OLD.status = 'suspended' AND OLD.flow_hold)) THEN
            UPDATE {schema}.concurrency_slots SET held = held - 1 WHERE workflow = OLD.workflow AND key = OLD.flow_key;
        END IF;
        PERFORM {schema}.flow_admit(NEW.workflow, NEW.flow_key);
        RETURN NULL;
    END $$;
    CREATE TRIGGER runs_flow_insert AFTER INSERT ON {schema}.runs FOR EACH ROW
        WHEN (NEW.flow_key IS NOT NULL) EXECUTE FUNCTION {schema}.flow_changed();
    CREATE TRIGGER runs_flow_update AFTER UPDATE OF status, waiting_for ON {schema}.runs FOR EACH ROW
        WHEN (OLD.flow_key IS NOT NULL AND ((OLD.waiting_for IS NULL AND NEW.waiting_for IS NOT NULL)
            OR (OLD.waiting_for IS NULL AND (OLD.status IN ('pending', 'running') OR (OLD.status = 'suspended' AND OLD.flow_hold))
                AND NOT (NEW.waiting_for IS NULL
                         AND (NEW.status IN ('pending', 'running') OR (NEW.status = 'suspended' AND NEW.flow_hold))))))
        EXECUTE FUNCTION {schema}.flow_changed();