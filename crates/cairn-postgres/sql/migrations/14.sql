CREATE TABLE {schema}.rate_buckets (bucket TEXT COLLATE "C" PRIMARY KEY);
    CREATE TABLE {schema}.rate_grants (bucket TEXT COLLATE "C" NOT NULL, at BIGINT NOT NULL);
    CREATE INDEX rate_grants_bucket ON {schema}.rate_grants (bucket, at);
    CREATE FUNCTION {schema}.take_rate(b TEXT, lim INTEGER, period BIGINT, asked BIGINT) RETURNS BIGINT
    LANGUAGE plpgsql AS $$
    DECLARE taken BIGINT;
    BEGIN
        INSERT INTO {schema}.rate_buckets (bucket) VALUES (b) ON CONFLICT DO NOTHING;
        PERFORM 1 FROM {schema}.rate_buckets WHERE bucket = b FOR UPDATE;
        DELETE FROM {schema}.rate_grants WHERE bucket = b AND at <= asked - 2 * period;
        SELECT count(*) INTO taken FROM {schema}.rate_grants WHERE bucket = b AND at > asked - period;
        IF taken < lim THEN
            INSERT INTO {schema}.rate_grants (bucket, at) VALUES (b, asked);
            RETURN NULL;
        END IF;
        RETURN (SELECT at FROM {schema}.rate_grants WHERE bucket = b AND at > asked - period
                ORDER BY at OFFSET taken - lim LIMIT 1) + period;
    END $$;