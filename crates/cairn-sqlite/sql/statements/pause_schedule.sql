UPDATE schedules SET paused = ?2, updated_at = ?4,
        next_fire_at = CASE WHEN ?2 = 0 THEN ?3 ELSE next_fire_at END
    WHERE name = ?1 AND paused <> ?2
