CREATE TABLE {schema}.schedules (
        name TEXT COLLATE "C" PRIMARY KEY,
        workflow TEXT COLLATE "C" NOT NULL,
        spec TEXT NOT NULL,
        input TEXT NOT NULL,
        paused BOOLEAN NOT NULL DEFAULT false,
        next_fire_at BIGINT,
        last_fired_at BIGINT,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL
    );
    CREATE INDEX schedules_due ON {schema}.schedules (next_fire_at) WHERE NOT paused AND next_fire_at IS NOT NULL;