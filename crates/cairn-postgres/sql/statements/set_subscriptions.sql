WITH wanted AS (SELECT * FROM unnest($2::text[], $3::text[], $4::int[]) AS w(workflow, pattern, version)),
                 gone AS (
                     DELETE FROM subscriptions o WHERE o.workflow = ANY($1)
                       AND NOT EXISTS (SELECT 1 FROM wanted w WHERE w.workflow = o.workflow AND w.pattern = o.pattern))
                 INSERT INTO subscriptions (workflow, pattern, version) SELECT workflow, pattern, version FROM wanted
                 ON CONFLICT (workflow, pattern) DO UPDATE SET version = excluded.version