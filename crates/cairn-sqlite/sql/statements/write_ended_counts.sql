INSERT INTO ended_counts (workflow, status, runs) VALUES (?1, ?2, ?3)
    ON CONFLICT (workflow, status) DO UPDATE SET runs = runs + excluded.runs
