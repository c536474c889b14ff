DROP TRIGGER IF EXISTS runs_flow_updated ON {schema}.runs;
    DROP FUNCTION {schema}.flow_updated();
    CREATE TABLE {schema}.flow_moves (
        xid xid8 NOT NULL,
        workflow TEXT COLLATE "C" NOT NULL,
        key TEXT COLLATE "C" NOT NULL,
        released INTEGER NOT NULL
    );
    CREATE INDEX flow_moves_xid ON {schema}.flow_moves (xid);
    CREATE FUNCTION {schema}.flow_moved() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO {schema}.flow_moves (xid, workflow, key, released)
        VALUES (pg_current_xact_id(), OLD.workflow, OLD.flow_key,
                CASE WHEN OLD.waiting_for IS NULL
                      AND (OLD.status IN ('pending', 'running') OR (OLD.status = 'suspended' AND OLD.flow_hold))
                     THEN 1 ELSE 0 END);
        RETURN NULL;
    END $$;
    CREATE FUNCTION {schema}.flow_settle() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE g RECORD;
    BEGIN
        FOR g IN
            WITH moved AS (
                DELETE FROM {schema}.flow_moves WHERE xid = pg_current_xact_id() RETURNING workflow, key, released)
            SELECT workflow, key, sum(released) AS released FROM moved GROUP BY workflow, key ORDER BY workflow, key
        LOOP
            IF g.released > 0 THEN
                UPDATE {schema}.concurrency_slots SET held = held - g.released
                    WHERE workflow = g.workflow AND key = g.key;
            END IF;
            PERFORM {schema}.flow_admit(g.workflow, g.key);
        END LOOP;
        RETURN NULL;
    END $$;
    CREATE OR REPLACE FUNCTION {schema}.ensure_flow_triggers() RETURNS void LANGUAGE plpgsql AS $$
    BEGIN
        IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = '{schema}.runs'::regclass AND tgname = 'runs_flow_inserted')
        THEN
            CREATE TRIGGER runs_flow_inserted AFTER INSERT ON {schema}.runs REFERENCING NEW TABLE AS added
                FOR EACH STATEMENT EXECUTE FUNCTION {schema}.flow_inserted();
        END IF;
        IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = '{schema}.runs'::regclass AND tgname = 'runs_flow_moved')
        THEN
            CREATE TRIGGER runs_flow_moved AFTER UPDATE OF status, waiting_for ON {schema}.runs FOR EACH ROW
                WHEN (OLD.flow_key IS NOT NULL AND OLD.waiting_for IS NULL
                      AND (NEW.waiting_for IS NOT NULL
                           OR ((OLD.status IN ('pending', 'running') OR (OLD.status = 'suspended' AND OLD.flow_hold))
                               AND NOT (NEW.status IN ('pending', 'running')
                                        OR (NEW.status = 'suspended' AND NEW.flow_hold)))))
                EXECUTE FUNCTION {schema}.flow_moved();
            CREATE TRIGGER runs_flow_settle AFTER UPDATE OF status, waiting_for ON {schema}.runs
                FOR EACH STATEMENT EXECUTE FUNCTION {schema}.flow_settle();
        END IF;
    EXCEPTION WHEN duplicate_object THEN
        NULL;
    END $$;
    SELECT {schema}.ensure_flow_triggers() WHERE EXISTS (SELECT 1 FROM {schema}.concurrency_rules);