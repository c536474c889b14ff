CREATE TABLE {schema}.ended_counts (
        workflow TEXT COLLATE "C" NOT NULL,
        status TEXT NOT NULL,
        runs BIGINT NOT NULL,
        PRIMARY KEY (workflow, status)
    );
    CREATE TABLE {schema}.ended_deltas (
        workflow TEXT COLLATE "C" NOT NULL,
        status TEXT NOT NULL,
        runs BIGINT NOT NULL
    );
    INSERT INTO {schema}.ended_counts (workflow, status, runs)
        SELECT workflow, status, count(*) FROM {schema}.runs WHERE status IN ('completed', 'failed', 'cancelled')
        GROUP BY workflow, status;
    CREATE INDEX runs_paused ON {schema}.runs (workflow) WHERE status = 'paused';
    CREATE FUNCTION {schema}.count_ended() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP <> 'INSERT' AND OLD.status IN ('completed', 'failed', 'cancelled') THEN
            INSERT INTO {schema}.ended_deltas (workflow, status, runs) VALUES (OLD.workflow, OLD.status, -1);
        END IF;
        IF TG_OP <> 'DELETE' AND NEW.status IN ('completed', 'failed', 'cancelled') THEN
            INSERT INTO {schema}.ended_deltas (workflow, status, runs) VALUES (NEW.workflow, NEW.status, 1);
        END IF;
        RETURN NULL;
    END $$;
    CREATE TRIGGER runs_ended_insert AFTER INSERT ON {schema}.runs FOR EACH ROW
        WHEN (NEW.status IN ('completed', 'failed', 'cancelled')) EXECUTE FUNCTION {schema}.count_ended();
    CREATE TRIGGER runs_ended_update AFTER UPDATE OF status ON {schema}.runs FOR EACH ROW
        WHEN (OLD.status IS DISTINCT FROM NEW.status
            AND (OLD.status IN ('completed', 'failed', 'cancelled') OR NEW.status IN ('completed', 'failed', 'cancelled')))
        EXECUTE FUNCTION {schema}.count_ended();
    CREATE TRIGGER runs_ended_delete AFTER DELETE ON {schema}.runs FOR EACH ROW
        WHEN (OLD.status IN ('completed', 'failed', 'cancelled')) EXECUTE FUNCTION {schema}.count_ended();