SELECT min(at) FROM (
                     SELECT min(wake_at) AS at FROM runs WHERE status = 'suspended' AND wake_at IS NOT NULL
                       AND (workflow || '@' || version) = ANY($1)
                     UNION ALL
                     SELECT min(next_fire_at) FROM schedules WHERE NOT paused AND next_fire_at IS NOT NULL
                       AND workflow = ANY($2)) AS due