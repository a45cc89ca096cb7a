-- Request rules: the method and (cleaned) path of a request the egress
-- proxy read, with the rule that decided it.
ALTER TABLE egress_log ADD COLUMN method TEXT NOT NULL DEFAULT '';
ALTER TABLE egress_log ADD COLUMN path TEXT NOT NULL DEFAULT '';
