ALTER TABLE {schema}.runs ADD COLUMN continued_from TEXT COLLATE "C", ADD COLUMN continued_as TEXT COLLATE "C";
    CREATE OR REPLACE FUNCTION {schema}.count_ended() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP <> 'INSERT' AND OLD.status IN ('completed', 'failed', 'cancelled', 'continued') THEN
            INSERT INTO {schema}.ended_deltas (workflow, status, runs) VALUES (OLD.workflow, OLD.status, -1);
        END IF;
        IF TG_OP <> 'DELETE' AND NEW.status IN ('completed', 'failed', 'cancelled', 'continued') THEN
            INSERT INTO {schema}.ended_deltas (workflow, status, runs) VALUES (NEW.workflow, NEW.status, 1);
        END IF;
        RETURN NULL;
    END $$;
    DROP TRIGGER runs_ended_insert ON {schema}.runs;
    DROP TRIGGER runs_ended_update ON {schema}.runs;
    DROP TRIGGER runs_ended_delete ON {schema}.runs;
    CREATE TRIGGER runs_ended_insert AFTER INSERT ON {schema}.runs FOR EACH ROW
        WHEN (NEW.status IN ('completed', 'failed', 'cancelled', 'continued')) EXECUTE FUNCTION {schema}.count_ended();
    CREATE TRIGGER runs_ended_update AFTER UPDATE OF status ON {schema}.runs FOR EACH ROW
        WHEN (OLD.status IS DISTINCT FROM NEW.status
            AND (OLD.status IN ('completed', 'failed', 'cancelled', 'continued')
                 OR NEW.status IN ('completed', 'failed', 'cancelled', 'continued')))
        EXECUTE FUNCTION {schema}.count_ended();
    CREATE TRIGGER runs_ended_delete AFTER DELETE ON {schema}.runs FOR EACH ROW
        WHEN (OLD.status IN ('completed', 'failed', 'cancelled', 'continued')) EXECUTE FUNCTION {schema}.count_ended();