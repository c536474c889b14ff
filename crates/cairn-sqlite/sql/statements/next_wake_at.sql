SELECT min(at) FROM (
    SELECT min(wake_at) AS at FROM runs INDEXED BY runs_timer WHERE status = 'suspended' AND wake_at IS NOT NULL
      AND (workflow || '@' || version) IN (SELECT value FROM json_each(?1))
    UNION ALL
    SELECT min(next_fire_at) FROM schedules WHERE paused = 0 AND next_fire_at IS NOT NULL
      AND workflow IN (SELECT value FROM json_each(?2)))
