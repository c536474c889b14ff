UPDATE schedules SET next_fire_at = $3, last_fired_at = coalesce($4, last_fired_at), updated_at = $5
                 WHERE name = $1 AND NOT paused AND next_fire_at = $2