UPDATE {schema}.runs SET waiting_for = NULL WHERE waiting_for IS NOT NULL AND status <> 'pending';
    UPDATE {schema}.concurrency_slots s SET held = (
        SELECT count(*) FROM {schema}.runs r WHERE r.workflow = s.workflow AND r.flow_key = s.key
          AND r.waiting_for IS NULL
          AND (r.status IN ('pending', 'running') OR (r.status = 'suspended' AND r.flow_hold)));
    SELECT {schema}.flow_admit(g.workflow, g.flow_key)
    FROM (SELECT DISTINCT workflow, flow_key FROM {schema}.runs WHERE waiting_for IS NOT NULL
          ORDER BY workflow, flow_key) g;