//! Members released and not placed yet, on their way to nodes: where the pass counts their
//! room, so that neither a gang nor the head's reservation takes it.

use super::*;

#[test]
fn members_on_their_way_are_counted_outside_the_reservation_the_extender_keeps_them_from() {
    // Four nodes of 32 CPUs, 8 free on each; big (two members of 32) heads the line and holds
    // all 8 free on n1 and n2. Four small jobs of 4 CPUs are released beside it: the extender
    // keeps them out of the room held, so they are on their way to n3 and n4, and a fifth has
    // no room but the reservation's.
    let mut s = State::default();
    s.apply_queue(Queue::new("q"));
    for n in ["n1", "n2", "n3", "n4"] {
        s.apply_node(node(n, 32_000));
        running(&mut s, &format!("fill-{n}"), None, n, 24_000, NOW - 500);
    }
    gang(&mut s, "big", "q", 2, 32_000, NOW - 300);
    let first = decide_at(&s, &|_| false, NOW);
    assert_eq!(held_nodes(&first), ["n1", "n2"]);
    crate::admit::after_pass::record(&mut s, None, &first, std::time::Instant::now());
    for i in 0..4 {
        gang(&mut s, &format!("small{i}"), "q", 1, 4_000, NOW - 100 + i);
    }
    let second = decide_at(&s, &|_| false, NOW);
    assert_eq!(
        admitted(&second).len(),
        4,
        "the four beside the reservation"
    );
    release(&mut s, &second);
    crate::admit::after_pass::record(
        &mut s,
        first.hold.as_ref(),
        &second,
        std::time::Instant::now(),
    );
    gang(&mut s, "small4", "q", 1, 4_000, NOW - 50);
    let third = decide_at(&s, &|_| false, NOW);
    assert_eq!(admitted(&third), Vec::<String>::new());
    assert_eq!(reason(&third, "small4"), Reason::BehindReservation);
    let each = Resources::from([("cpu", 8_000), ("pods", 1)]);
    assert_eq!(
        third.hold.unwrap().nodes,
        vec![("n1".into(), each.clone()), ("n2".into(), each)],
        "still all that is free on n1 and n2"
    );
}
