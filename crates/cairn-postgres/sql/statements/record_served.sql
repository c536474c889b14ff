INSERT INTO served_workflows (name, version, first_served, last_served)
    SELECT name, version, $3, $3 FROM unnest($1::text[], $2::int[]) AS s(name, version)
    ON CONFLICT (name, version) DO UPDATE SET
        first_served = least(served_workflows.first_served, excluded.first_served),
        last_served = greatest(served_workflows.last_served, excluded.last_served)
