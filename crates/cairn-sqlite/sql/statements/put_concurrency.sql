INSERT INTO concurrency_rules (workflow, key, lim, hold) VALUES (?1, ?2, ?3, ?4)
    ON CONFLICT (workflow) DO UPDATE SET key = excluded.key, lim = excluded.lim, hold = excluded.hold
