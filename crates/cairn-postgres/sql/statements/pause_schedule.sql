UPDATE schedules SET paused = $2, updated_at = $4,
                     next_fire_at = CASE WHEN $2 THEN next_fire_at ELSE $3 END
                 WHERE name = $1 AND paused <> $2