"""Goal trees (SPEC T5, T6): ids, insertion order, stats roll-up, cascade completion."""

from __future__ import annotations

import pytest

from cyber_agent.errors import GoalError, GoalNotFoundError
from cyber_agent.trace import Goal, GoalTree


def _tree(cascade: bool = True) -> GoalTree:
    """1 (2 (3, 4), 5) and 6 at the top level."""
    tree = GoalTree(mission="m", cascade_completion=cascade)
    tree.add("one")
    tree.add("two", parent_id="1")
    tree.add("three", parent_id="2")
    tree.add("four", parent_id="2")
    tree.add("five", parent_id="1")
    tree.add("six")
    return tree


def test_ids_are_dense_and_structure_is_queryable():
    tree = _tree()
    assert [g.id for g in tree.goals] == ["1", "2", "3", "4", "5", "6"] and tree.next_id == 7
    assert [g.id for g in tree.children("2")] == ["3", "4"]
    assert [g.id for g in tree.children(None)] == ["1", "6"]
    assert [g.id for g in tree.ancestors("3")] == ["3", "2", "1"]
    assert (tree.depth("3"), tree.depth("6")) == (2, 0)
    assert tree.find("99") is None and tree.find(None) is None
    with pytest.raises(GoalNotFoundError):
        tree.get("99", "t")


def test_add_after_a_sibling_keeps_its_subtree_together():
    tree = _tree()
    goal = tree.add("after two", after_id="2")
    assert goal.parent_id == "1"
    assert [g.id for g in tree.goals] == ["1", "2", "3", "4", "7", "5", "6"]


@pytest.mark.parametrize(("description", "fields"), [("  ", {}), ("x", {"parent_id": "99"}), ("x", {"after_id": "99"})])
def test_add_refuses_bad_goals(description, fields):
    with pytest.raises(GoalError):
        _tree().add(description, **fields)


def test_insert_keeps_ids_unique_and_allocation_ahead():
    tree = _tree()
    tree.insert(Goal(id="10", description="imported", parent_id="6"))
    assert tree.add("next").id == "11"
    with pytest.raises(GoalError):
        tree.insert(Goal(id="10", description="again"))
    with pytest.raises(GoalError):
        tree.insert(Goal(id="12", description="orphan", parent_id="99"))


def test_record_message_updates_self_and_every_ancestor():
    tree = _tree()
    changed = tree.record_message("3", 100, 0.5)
    assert [g.id for g in changed] == ["3", "2", "1"]
    tree.record_message("5", 10, 0.25)
    assert [tree.find(i).self_stats.message_count for i in "123456"] == [0, 0, 1, 0, 1, 0]
    assert [tree.find(i).cumulative_stats.message_count for i in "123456"] == [2, 1, 1, 0, 1, 0]
    assert tree.find("1").cumulative_stats.total_tokens == 110
    assert tree.find("1").cumulative_stats.total_cost == pytest.approx(0.75)
    assert tree.record_message("99", 1, 0.0) == []


def test_recompute_cumulative_matches_incremental_stats():
    tree = _tree()
    for goal_id, tokens in (("3", 5), ("4", 7), ("2", 11), ("6", 13)):
        tree.record_message(goal_id, tokens, 0.0)
    expected = [g.cumulative_stats.model_dump() for g in tree.goals]
    for goal in tree.goals:
        goal.cumulative_stats.message_count = 999
    tree.recompute_cumulative()
    assert [g.cumulative_stats.model_dump() for g in tree.goals] == expected


def test_legacy_cascade_completes_parents_whose_children_are_all_done():
    tree = _tree()
    assert [g.id for g in tree.set_status("3", "completed")] == ["3"]
    assert [g.id for g in tree.set_status("4", "abandoned")] == ["4"]  # abandoned does not cascade by itself
    assert tree.find("2").status == "pending"
    tree.set_status("4", "completed")
    assert tree.find("2").status == "completed" and tree.find("1").status == "pending"  # 5 still open
    changed = tree.set_status("5", "completed", summary="done")
    assert [g.id for g in changed] == ["5", "1"] and tree.find("5").summary == "done"
    assert tree.find("1").completed_at is not None and tree.find("6").status == "pending"


def test_cascade_needs_at_least_one_completed_child():
    tree = _tree()
    tree.set_status("3", "abandoned")
    tree.set_status("4", "completed")
    assert tree.find("2").status == "completed"
    other = _tree()
    other.set_status("3", "abandoned")
    other.set_status("4", "abandoned")
    assert other.find("2").status == "pending"


def test_recursive_trees_never_cascade():
    tree = _tree(cascade=False)
    for goal_id in ("3", "4", "5"):
        assert [g.id for g in tree.set_status(goal_id, "completed")] == [goal_id]
    assert tree.find("2").status == tree.find("1").status == "pending"


def test_reopening_a_goal_clears_its_completion_time():
    tree = _tree()
    tree.set_status("6", "completed")
    tree.set_status("6", "in_progress")
    assert tree.find("6").completed_at is None


def test_next_open_goes_to_the_next_sibling_then_up():
    tree = _tree()
    assert tree.next_open(tree.find("3")).id == "4"
    tree.set_status("5", "completed")
    assert tree.next_open(tree.find("4")).id == "2"
    assert tree.next_open(tree.find("6")) is None


def test_check_structure_refuses_duplicates_dangling_parents_and_loops():
    _tree().check_structure()
    for mutate in (lambda t: t.goals.append(t.goals[0]),
                   lambda t: setattr(t.find("3"), "parent_id", "99"),
                   lambda t: setattr(t.find("1"), "parent_id", "3")):
        tree = _tree()
        mutate(tree)
        with pytest.raises(GoalError):
            tree.check_structure()


def test_prompt_rendering_shows_status_depth_and_focus():
    tree = _tree()
    tree.set_status("3", "completed", summary="found it")
    tree.current_id = "4"
    lines = tree.to_prompt().splitlines()
    assert lines[0] == "[ ] 1. one"
    assert lines[2] == "    [x] 3. three — found it"
    assert lines[3].endswith("<- current")
    assert GoalTree().to_prompt() == "(no goals yet)"
    tree.set_status("4", "completed")  # a finished goal keeps current_id but loses the marker
    assert tree.current_id == "4" and "<- current" not in tree.to_prompt()
