DROP TRIGGER runs_flow_insert ON {schema}.runs;
    DROP TRIGGER runs_flow_update ON {schema}.runs;
    DROP FUNCTION {schema}.flow_changed();
    CREATE FUNCTION {schema}.flow_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM {schema}.flow_admit(g.workflow, g.flow_key)
        FROM (SELECT DISTINCT workflow, flow_key FROM added WHERE flow_key IS NOT NULL ORDER BY workflow, flow_key) g;
        RETURN NULL;
    END $$;
    CREATE FUNCTION {schema}.flow_updated() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE g RECORD;
    BEGIN
        FOR g IN
            WITH moved AS (
                SELECT o.workflow, o.flow_key,
                    o.waiting_for IS NULL AND (o.status IN ('pending', 'running') OR (o.status = 'suspended' AND o.flow_hold))
                        AS held,
                    n.waiting_for IS NULL AND (n.status IN ('pending', 'running') OR (n.status = 'suspended' AND n.flow_hold))
                        AS holds,
                    o.waiting_for IS NULL AND n.waiting_for IS NOT NULL AS queued
                FROM before o JOIN after n ON n.id = o.id
                WHERE o.flow_key IS NOT NULL)
            SELECT workflow, flow_key, count(*) FILTER (WHERE held AND NOT holds) AS released
            FROM moved WHERE (held AND NOT holds) OR queued
            GROUP BY workflow, flow_key ORDER BY workflow, flow_key
        LOOP
            IF g.released > 0 THEN
                UPDATE {schema}.concurrency_slots SET held = held - g.released
                    WHERE workflow = g.workflow AND key = g.flow_key;
            END IF;
            PERFORM {schema}.flow_admit(g.workflow, g.flow_key);
        END LOOP;
        RETURN NULL;
    END $$;
    CREATE FUNCTION {schema}.ensure_flow_triggers() RETURNS void LANGUAGE plpgsql AS $$
    BEGIN
        IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = '{schema}.runs'::regclass AND tgname = 'runs_flow_inserted')
        THEN
            CREATE TRIGGER runs_flow_inserted AFTER INSERT ON {schema}.runs REFERENCING NEW TABLE AS added
                FOR EACH STATEMENT EXECUTE FUNCTION {schema}.flow_inserted();
            CREATE TRIGGER runs_flow_updated AFTER UPDATE ON {schema}.runs
                REFERENCING OLD TABLE AS before NEW TABLE AS after
                FOR EACH STATEMENT EXECUTE FUNCTION {schema}.flow_updated();
        END IF;
    EXCEPTION WHEN duplicate_object THEN
        NULL;
    END $$;
    SELECT {schema}.ensure_flow_triggers() WHERE EXISTS (SELECT 1 FROM {schema}.concurrency_rules);