INSERT INTO concurrency_rules (workflow, key, path, lim, hold) VALUES ($1, $2, $3, $4, $5)
                 ON CONFLICT (workflow) DO UPDATE
                     SET key = excluded.key, path = excluded.path, lim = excluded.lim, hold = excluded.hold