-- Child instances. A step's Children outcome inserts instances whose
-- parent_id is the step's instance and parks that instance in
-- awaiting_children with pending_children set to the number inserted. A
-- child's end (done, failed or cancelled) decrements its parent's count
-- once, in the transaction that ends it: releases_parent is true until
-- then, and cleared by the same transaction. The decrement to zero makes
-- the parent runnable.
ALTER TABLE durable_instance
    ADD COLUMN parent_id        bigint,
    ADD COLUMN releases_parent  boolean NOT NULL DEFAULT false,
    ADD COLUMN pending_children integer NOT NULL DEFAULT 0;

-- A parent's children: cancellation cascades, garbage collection, ChildrenOf.
CREATE INDEX durable_instance_parent_idx
    ON durable_instance (parent_id)
    WHERE parent_id IS NOT NULL;
