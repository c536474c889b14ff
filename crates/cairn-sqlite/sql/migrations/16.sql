
UPDATE runs SET waiting_for = NULL WHERE waiting_for IS NOT NULL AND status <> 'pending';
UPDATE concurrency_slots SET held = (
    SELECT count(*) FROM runs r WHERE r.workflow = concurrency_slots.workflow AND r.flow_key = concurrency_slots.key
      AND r.waiting_for IS NULL
      AND (r.status IN ('pending', 'running') OR (r.status = 'suspended' AND r.flow_hold = 1)));
INSERT INTO flow_admit (workflow, key) SELECT DISTINCT workflow, flow_key FROM runs WHERE waiting_for IS NOT NULL;
