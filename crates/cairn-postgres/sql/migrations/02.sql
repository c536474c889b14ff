DROP INDEX {schema}.runs_wake;
    DROP INDEX {schema}.runs_lease;
    ALTER TABLE {schema}.runs ALTER COLUMN id TYPE TEXT COLLATE "C", ALTER COLUMN workflow TYPE TEXT COLLATE "C";
    ALTER TABLE {schema}.journal ALTER COLUMN run_id TYPE TEXT COLLATE "C";
    ALTER TABLE {schema}.signals ALTER COLUMN run_id TYPE TEXT COLLATE "C";
    CREATE INDEX runs_pending ON {schema}.runs (created_at) WHERE status = 'pending';
    CREATE INDEX runs_wake ON {schema}.runs (wake_at) WHERE status = 'suspended';
    CREATE INDEX runs_lease ON {schema}.runs (lease_expires_at) WHERE status = 'running';