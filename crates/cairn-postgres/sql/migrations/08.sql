CREATE INDEX runs_failed ON {schema}.runs (workflow, created_at, id) WHERE status = 'failed';
    CREATE INDEX runs_cancelled ON {schema}.runs (workflow, created_at, id) WHERE status = 'cancelled';