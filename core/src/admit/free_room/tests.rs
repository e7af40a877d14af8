use proptest::prelude::*;

use super::*;
use crate::model::Node;

fn requests((cpus, gib): (i64, i64)) -> Resources {
    Resources::from([("cpu", cpus * 1_000), ("memory", gib << 30)])
}

proptest! {
    /// The pass's placement, which skips nodes known too full for a shape, places every
    /// group where the one placement model does, group after group.
    #[test]
    fn the_pass_places_every_group_where_first_fit_does(
        nodes in prop::collection::vec((1i64..17, 1i64..33), 1..12),
        groups in prop::collection::vec(
            prop::collection::vec((1i64..5, 1i64..9), 1..6),
            1..12,
        ),
    ) {
        let mut state = State::default();
        for (i, &shape) in nodes.iter().enumerate() {
            state.apply_node(Node {
                name: format!("n{i:02}"),
                allocatable: requests(shape),
                ..Default::default()
            });
        }
        let mut room = Room::new(&state, &Resources::new(), 0);
        let mut model: Vec<Resources> = nodes.iter().map(|&s| requests(s)).collect();
        for group in groups {
            let need: Vec<Resources> = group.into_iter().map(requests).collect();
            let placed = room.place(&need.iter().collect::<Vec<_>>());
            let expected = first_fit(&model, &need);
            prop_assert_eq!(placed.is_ok(), expected.is_ok());
            if let Ok(at) = expected {
                for (node, pod) in at {
                    model[node].sub(pod);
                }
            }
            prop_assert_eq!(&room.nodes, &model);
        }
    }
}
