-- 0004: the task branch's head when REVIEW approved it; a merge is made of exactly that
-- commit, and refused once the branch has moved. NULL: not reviewed yet.

ALTER TABLE tasks ADD COLUMN reviewed_head text;
