UPDATE schedules SET next_fire_at = CASE WHEN $6 THEN next_fire_at ELSE $3 END,
                 last_fired_at = coalesce($4, last_fired_at), updated_at = $5
                 WHERE name = $1 AND ($6 OR (NOT paused AND next_fire_at = $2))