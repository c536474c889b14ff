
DROP TRIGGER IF EXISTS runs_flow_insert;
DROP TRIGGER IF EXISTS runs_flow_update;
