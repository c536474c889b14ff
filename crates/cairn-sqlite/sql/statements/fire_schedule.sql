UPDATE schedules SET next_fire_at = ?3, last_fired_at = coalesce(?4, last_fired_at), updated_at = ?5
    WHERE name = ?1 AND paused = 0 AND next_fire_at = ?2
