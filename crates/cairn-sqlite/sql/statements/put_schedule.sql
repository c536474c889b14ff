INSERT INTO schedules (name, workflow, spec, input, next_fire_at, created_at, updated_at)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)
    ON CONFLICT (name) DO UPDATE SET workflow = excluded.workflow, input = excluded.input,
        next_fire_at = CASE WHEN spec = excluded.spec THEN next_fire_at ELSE excluded.next_fire_at END,
        spec = excluded.spec, updated_at = excluded.updated_at
