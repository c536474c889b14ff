CREATE TABLE {schema}.subscriptions (
        workflow TEXT COLLATE "C" NOT NULL,
        pattern TEXT COLLATE "C" NOT NULL,
        version INTEGER NOT NULL,
        PRIMARY KEY (workflow, pattern)
    );