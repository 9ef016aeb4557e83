use super::model::{delta, MState, Model};
use super::*;
use proptest::prelude::*;

const BE: IoPrioClass = IoPrioClass::Be;

fn classes() -> [IoPrioClass; 3] {
    [IoPrioClass::Rt, IoPrioClass::Be, IoPrioClass::Idle]
}

/// Deterministic xorshift64*.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn range(&mut self, low: u64, high: u64) -> u64 {
        low + self.below(high - low + 1)
    }
}

// ----- the model-based test -----

#[derive(Clone, Debug)]
enum Op {
    AddLeaf {
        parent: usize,
        weight: u32,
        class: u8,
    },
    AddGroup {
        parent: usize,
        weight: u32,
        class: u8,
    },
    RemoveLeaf(usize),
    RemoveGroup(usize),
    Activate(usize, u64),
    Deactivate(usize),
    SetBudget(usize, u64),
    Serve {
        after: u64,
        service: u64,
    },
    Charge(usize, u64),
    /// A selection whose leaf's turn ends: [`FairQueue::expire`] with its next budget, or
    /// none (it has no more work).
    ServeExpire {
        after: u64,
        service: u64,
        next: Option<u64>,
    },
    /// [`FairQueue::expire`] of any leaf, active or not.
    Expire(usize, u64, Option<u64>),
    /// [`FairQueue::serve_aside`] of any leaf, active or not.
    ServeAside(usize, u64),
    /// A selection whose leaf is put in service ([`FairQueue::begin_turn`]).
    BeginTurn {
        after: u64,
    },
    SetWeight {
        pick: usize,
        group: bool,
        weight: u32,
    },
    SetClass {
        pick: usize,
        group: bool,
        class: u8,
    },
}

fn weight_strategy() -> impl Strategy<Value = u32> {
    prop_oneof![
        3 => Just(100u32),
        1 => Just(1u32),
        1 => Just(10_000u32),
        3 => 1u32..=1000,
    ]
}

fn class_strategy() -> impl Strategy<Value = u8> {
    prop_oneof![6 => Just(1u8), 1 => Just(0u8), 1 => Just(2u8)]
}

fn service_strategy() -> impl Strategy<Value = u64> {
    prop_oneof![
        4 => 1u64..=65_536,
        1 => Just(0u64),
        1 => 1u64..=4,
        1 => 1_000_000u64..=1_000_000_000,
    ]
}

fn op_strategy() -> impl Strategy<Value = Op> {
    let pick = any::<usize>();
    prop_oneof![
        4 => (pick, weight_strategy(), class_strategy())
            .prop_map(|(parent, weight, class)| Op::AddLeaf { parent, weight, class }),
        2 => (pick, weight_strategy(), class_strategy())
            .prop_map(|(parent, weight, class)| Op::AddGroup { parent, weight, class }),
        1 => pick.prop_map(Op::RemoveLeaf),
        1 => pick.prop_map(Op::RemoveGroup),
        8 => (pick, service_strategy()).prop_map(|(p, b)| Op::Activate(p, b)),
        3 => pick.prop_map(Op::Deactivate),
        1 => (pick, service_strategy()).prop_map(|(p, b)| Op::SetBudget(p, b)),
        12 => (0u64..=60_000_000, service_strategy())
            .prop_map(|(after, service)| Op::Serve { after, service }),
        2 => (pick, service_strategy()).prop_map(|(p, s)| Op::Charge(p, s)),
        6 => (0u64..=60_000_000, service_strategy(), proptest::option::of(service_strategy()))
            .prop_map(|(after, service, next)| Op::ServeExpire { after, service, next }),
        1 => (pick, service_strategy(), proptest::option::of(service_strategy()))
            .prop_map(|(p, s, next)| Op::Expire(p, s, next)),
        4 => (pick, service_strategy()).prop_map(|(p, s)| Op::ServeAside(p, s)),
        3 => (0u64..=60_000_000).prop_map(|after| Op::BeginTurn { after }),
        2 => (pick, any::<bool>(), weight_strategy())
            .prop_map(|(pick, group, weight)| Op::SetWeight { pick, group, weight }),
        1 => (pick, any::<bool>(), class_strategy())
            .prop_map(|(pick, group, class)| Op::SetClass { pick, group, class }),
    ]
}

/// The real structure and the model side by side.
struct Pair {
    fq: FairQueue,
    model: Model,
    leaves: Vec<LeafId>,
    /// Groups, the root first.
    groups: Vec<FqGroupId>,
    now: Nanos,
    selections: usize,
}

impl Pair {
    /// Service trees keep lists of up to `list_max` active entities before building heaps.
    fn new(list_max: u32) -> Self {
        let fq = FairQueue::with_list_max(FqConfig::default(), list_max);
        let model = Model::new(fq.config().idle_class_timeout);
        Pair {
            fq,
            model,
            leaves: Vec::new(),
            groups: vec![FqGroupId::ROOT],
            now: 0,
            selections: 0,
        }
    }

    fn leaf(&self, pick: usize) -> Option<LeafId> {
        (!self.leaves.is_empty()).then(|| self.leaves[pick % self.leaves.len()])
    }

    fn group(&self, pick: usize) -> FqGroupId {
        self.groups[pick % self.groups.len()]
    }

    fn apply(&mut self, op: &Op) {
        match *op {
            Op::AddLeaf {
                parent,
                weight,
                class,
            } => {
                let parent = self.group(parent);
                let leaf = self.fq.add_leaf(parent, weight, class_of(class)).unwrap();
                self.model
                    .add(leaf.index(), parent.index(), weight, class, true);
                self.leaves.push(leaf);
            }
            Op::AddGroup {
                parent,
                weight,
                class,
            } => {
                let parent = self.group(parent);
                let group = self.fq.add_group(parent, weight, class_of(class)).unwrap();
                self.model
                    .add(group.index(), parent.index(), weight, class, false);
                self.groups.push(group);
            }
            Op::RemoveLeaf(pick) => {
                if let Some(leaf) = self.leaf(pick) {
                    self.fq.remove_leaf(leaf).unwrap();
                    self.model.remove(leaf.index());
                    self.leaves.retain(|&l| l != leaf);
                    assert_eq!(self.fq.is_active(leaf), Err(FqError::UnknownLeaf(leaf)));
                }
            }
            Op::RemoveGroup(pick) => {
                let group = self.group(pick);
                let result = self.fq.remove_group(group);
                if group == FqGroupId::ROOT {
                    assert_eq!(result, Err(FqError::Root));
                } else if self.model.has_children(group.index()) {
                    assert_eq!(result, Err(FqError::GroupNotEmpty(group)));
                } else {
                    assert_eq!(result, Ok(()));
                    self.model.remove(group.index());
                    self.groups.retain(|&g| g != group);
                }
            }
            Op::Activate(pick, budget) => {
                if let Some(leaf) = self.leaf(pick) {
                    self.fq.activate(leaf, budget).unwrap();
                    self.model.activate(leaf.index(), budget);
                }
            }
            Op::Deactivate(pick) => {
                if let Some(leaf) = self.leaf(pick) {
                    self.fq.deactivate(leaf).unwrap();
                    self.model.deactivate(leaf.index());
                }
            }
            Op::SetBudget(pick, budget) => {
                if let Some(leaf) = self.leaf(pick) {
                    self.fq.set_budget(leaf, budget).unwrap();
                    self.model.set_budget(leaf.index(), budget);
                }
            }
            Op::Serve { after, service } => {
                if let Some(leaf) = self.select(after) {
                    self.fq.charge(leaf, service).unwrap();
                    self.model.charge(leaf.index(), service);
                }
            }
            Op::Charge(pick, service) => {
                if let Some(leaf) = self.leaf(pick) {
                    self.fq.charge(leaf, service).unwrap();
                    self.model.charge(leaf.index(), service);
                }
            }
            Op::ServeExpire {
                after,
                service,
                next,
            } => {
                if let Some(leaf) = self.select(after) {
                    self.expire(leaf, service, next);
                }
            }
            Op::Expire(pick, service, next) => {
                if let Some(leaf) = self.leaf(pick) {
                    self.expire(leaf, service, next);
                }
            }
            Op::ServeAside(pick, service) => {
                if let Some(leaf) = self.leaf(pick) {
                    self.fq.serve_aside(leaf, service).unwrap();
                    self.model.serve_aside(leaf.index(), service);
                }
            }
            Op::BeginTurn { after } => {
                if let Some(leaf) = self.select(after) {
                    self.fq.begin_turn(leaf).unwrap();
                    self.model.begin_turn(leaf.index());
                }
            }
            Op::SetWeight {
                pick,
                group,
                weight,
            } => {
                let node = if group {
                    Node::Group(self.group(pick))
                } else if let Some(leaf) = self.leaf(pick) {
                    Node::Leaf(leaf)
                } else {
                    return;
                };
                let result = self.fq.set_weight(node, weight);
                if node == Node::Group(FqGroupId::ROOT) {
                    assert_eq!(result, Err(FqError::Root));
                } else {
                    assert_eq!(result, Ok(()));
                    let slot = match node {
                        Node::Leaf(leaf) => leaf.index(),
                        Node::Group(group) => group.index(),
                    };
                    self.model.set_weight(slot, weight);
                }
            }
            Op::SetClass { pick, group, class } => {
                let node = if group {
                    Node::Group(self.group(pick))
                } else if let Some(leaf) = self.leaf(pick) {
                    Node::Leaf(leaf)
                } else {
                    return;
                };
                let result = self.fq.set_class(node, class_of(class));
                if node == Node::Group(FqGroupId::ROOT) {
                    assert_eq!(result, Err(FqError::Root));
                } else {
                    assert_eq!(result, Ok(()));
                    let slot = match node {
                        Node::Leaf(leaf) => leaf.index(),
                        Node::Group(group) => group.index(),
                    };
                    self.model.set_class(slot, class);
                }
            }
        }
        self.compare_state(op);
    }

    /// Selects `after` the last selection, on both sides, which must agree.
    fn select(&mut self, after: u64) -> Option<LeafId> {
        self.now += after;
        let real = self.fq.select_next(self.now);
        let expected = self.model.select(self.now);
        assert_eq!(
            real.map(LeafId::index),
            expected,
            "selection at {}",
            self.now
        );
        self.selections += usize::from(real.is_some());
        real
    }

    /// `expire` on the real structure; on the model, what it stands for: a charge, then a new
    /// budget or a deactivation.
    fn expire(&mut self, leaf: LeafId, service: u64, next: Option<u64>) {
        self.fq.expire(leaf, service, next).unwrap();
        self.model.charge(leaf.index(), service);
        match next {
            Some(budget) => self.model.set_budget(leaf.index(), budget),
            None => self.model.deactivate(leaf.index()),
        }
    }

    /// Tags of every entity, virtual times and weight sums of every tree, heap invariants.
    fn compare_state(&self, op: &Op) {
        let nodes = self
            .leaves
            .iter()
            .map(|&l| Node::Leaf(l))
            .chain(self.groups[1..].iter().map(|&g| Node::Group(g)));
        for node in nodes {
            let slot = match node {
                Node::Leaf(leaf) => leaf.index(),
                Node::Group(group) => group.index(),
            };
            let tags = self.fq.tags(node).unwrap();
            let m = &self.model.ents[&slot];
            let state = match m.state {
                MState::Inactive => State::Inactive,
                MState::Active => State::Active,
                MState::Idle => State::Idle,
            };
            assert_eq!(tags.state, state, "state of slot {slot} after {op:?}");
            assert_eq!(tags.budget, m.budget, "budget of slot {slot} after {op:?}");
            assert_eq!(tags.aside, m.aside, "aside of slot {slot} after {op:?}");
            if state == State::Active {
                assert_eq!(tags.start, m.start, "start of slot {slot} after {op:?}");
            }
            if state != State::Inactive {
                assert_eq!(tags.finish, m.finish, "finish of slot {slot} after {op:?}");
            }
        }
        for &group in &self.groups {
            for class in classes() {
                let key = (group.index(), class_index(class));
                let m = self.model.trees.get(&key).cloned().unwrap_or_default();
                let data = self.fq.ents[group.index() as usize].group as usize;
                let tree = &self.fq.groups[data].trees[class_index(class) as usize];
                assert_eq!(tree.vtime, m.vtime, "V of {key:?} after {op:?}");
                assert_eq!(tree.wsum as u128, m.wsum, "wsum of {key:?} after {op:?}");
                assert_eq!(tree.rem as u128, m.rem, "remainder of {key:?} after {op:?}");
            }
        }
        self.fq.check_invariants();
    }
}

impl FairQueue {
    /// Every heap entry matches its entity's place and key; every eligible entity has
    /// `S <= V` and every pending one `S > V`; no idle entity has `F <= V`.
    fn check_invariants(&self) {
        for (slot, entity) in self.ents.iter().enumerate() {
            if matches!(entity.kind, Kind::Free | Kind::Root) {
                continue;
            }
            let (group, class) = self.tree_of(slot as u32);
            let tree = &self.groups[group].trees[class];
            let at = self.pos[slot];
            match entity.place {
                Place::Eligible => {
                    assert!(tree.heaps);
                    assert_eq!(tree.eligible.get(at), heap::key(entity.finish, slot as u32));
                    assert!(entity.start <= tree.vtime);
                }
                Place::Pending => {
                    assert!(tree.heaps);
                    assert_eq!(tree.pending.get(at), heap::key(entity.start, slot as u32));
                    assert!(entity.start > tree.vtime);
                }
                Place::Listed => {
                    assert!(!tree.heaps);
                    let entry = tree.list[at as usize];
                    assert_eq!(entry.start, heap::key(entity.start, slot as u32));
                    assert_eq!(entry.finish, heap::key(entity.finish, slot as u32));
                }
                Place::Idle => {
                    assert_eq!(tree.idle.get(at), heap::key(entity.finish, slot as u32));
                    assert!(entity.finish > tree.vtime);
                }
                Place::Inactive => {}
            }
        }
        for data in &self.groups {
            for tree in &data.trees {
                assert!(tree.list.len() <= tree.list_max as usize);
                if tree.heaps {
                    assert!(tree.list.is_empty());
                } else {
                    assert!(tree.eligible.is_empty() && tree.pending.is_empty());
                }
                for entry in &tree.list {
                    let place = self.ents[heap::slot_of(entry.start) as usize].place;
                    assert_eq!(place, Place::Listed);
                }
                let heaps = [&tree.eligible, &tree.pending, &tree.idle];
                for heap in heaps {
                    for &k in heap.keys() {
                        assert_ne!(self.ents[heap::slot_of(k) as usize].kind, Kind::Free);
                    }
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    // Proves the scheduler, with its trees in lists, in heaps or in both in turn (every
    // `list_max`), makes exactly the selections (and keeps exactly the tags, virtual times and
    // weight sums) of a linear-scan reference of the same B-WF2Q+ rules, across random trees
    // and random interleavings of every operation.
    #[test]
    fn model_agrees_on_random_operations(
        ops in prop::collection::vec(op_strategy(), 1..400),
        list_max in prop_oneof![Just(0u32), Just(1), Just(2), Just(3), Just(4), Just(16)],
    ) {
        let mut pair = Pair::new(list_max);
        for op in &ops {
            pair.apply(op);
        }
    }
}

// Proves the same agreement on long runs over larger trees (a few hundred entities, two levels
// of groups), where heaps get deep and entities cycle through every state many times.
#[test]
fn model_agrees_on_long_seeded_runs() {
    for (seed, list_max) in (1..=6u64).zip([0, 4, 16, 0, 8, 16]) {
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let mut pair = Pair::new(list_max);
        for _ in 0..12 {
            let parent = rng.below(4) as usize;
            let op = Op::AddGroup {
                parent,
                weight: rng.range(1, 1000) as u32,
                class: if rng.below(8) == 0 { 0 } else { 1 },
            };
            pair.apply(&op);
        }
        for _ in 0..200 {
            let op = Op::AddLeaf {
                parent: rng.next() as usize,
                weight: [100, 1, 10_000, 250, 40][rng.below(5) as usize],
                class: [1, 1, 1, 1, 0, 2][rng.below(6) as usize],
            };
            pair.apply(&op);
        }
        for _ in 0..4000 {
            let pick = rng.next() as usize;
            let op = match rng.below(23) {
                0..=5 => Op::Activate(pick, rng.range(1, 131_072)),
                6..=7 => Op::Deactivate(pick),
                8 => Op::Charge(pick, rng.range(0, 65_536)),
                20..=21 => Op::ServeAside(pick, rng.range(1, 131_072)),
                22 => Op::BeginTurn {
                    after: rng.range(0, 5_000_000),
                },
                13..=14 => Op::ServeExpire {
                    after: rng.range(0, 5_000_000),
                    service: rng.range(1, 131_072),
                    next: (rng.below(2) == 0).then(|| rng.range(1, 131_072)),
                },
                9 => Op::SetWeight {
                    pick,
                    group: rng.below(2) == 0,
                    weight: rng.range(1, 10_000) as u32,
                },
                10 if rng.below(4) == 0 => Op::SetClass {
                    pick,
                    group: rng.below(4) == 0,
                    class: rng.below(3) as u8,
                },
                11 if rng.below(4) == 0 => Op::RemoveLeaf(pick),
                12 if rng.below(4) == 0 => Op::AddLeaf {
                    parent: pick,
                    weight: 100,
                    class: 1,
                },
                _ => Op::Serve {
                    after: rng.range(0, 5_000_000),
                    service: rng.range(1, 131_072),
                },
            };
            pair.apply(&op);
        }
        assert!(pair.selections > 1000, "seed {seed}: {}", pair.selections);
    }
}

// ----- shares -----

/// Serves `rounds` selections, each charged a service drawn from `service`; keeps every leaf
/// backlogged with its next service as budget. Returns the service per leaf.
fn serve_backlogged(
    fq: &mut FairQueue,
    leaves: &[LeafId],
    rounds: usize,
    mut service: impl FnMut() -> u64,
) -> Vec<u64> {
    let mut next: Vec<u64> = leaves.iter().map(|_| service()).collect();
    for (i, &leaf) in leaves.iter().enumerate() {
        fq.activate(leaf, next[i]).unwrap();
    }
    let mut served = vec![0u64; leaves.len()];
    for _ in 0..rounds {
        let leaf = fq.select_next(0).unwrap();
        let i = leaves.iter().position(|&l| l == leaf).unwrap();
        fq.charge(leaf, next[i]).unwrap();
        served[i] += next[i];
        next[i] = service();
        fq.set_budget(leaf, next[i]).unwrap();
    }
    served
}

fn assert_shares(served: &[u64], expected: &[f64], what: &str) {
    let total: u64 = served.iter().sum();
    for (i, (&got, &want)) in served.iter().zip(expected).enumerate() {
        let share = got as f64 / total as f64;
        assert!(
            (share - want).abs() <= 0.02 * want,
            "{what}: leaf {i} got {share:.5} of the service, expected {want:.5} +-2% ({served:?})"
        );
    }
}

// Proves backlogged leaves get service in proportion to their weights (within 2% of
// w_i / sum(w)), with random request sizes, including the extreme weights 1 and 10000.
#[test]
fn backlogged_leaves_share_by_weight() {
    let weights = [100u32, 200, 300, 400, 1000, 50];
    let mut fq = FairQueue::new();
    let leaves: Vec<LeafId> = weights
        .iter()
        .map(|&w| fq.add_leaf(FqGroupId::ROOT, w, BE).unwrap())
        .collect();
    let mut rng = Rng(7);
    let served = serve_backlogged(&mut fq, &leaves, 200_000, || rng.range(512, 131_072));
    let sum: u32 = weights.iter().sum();
    let expected: Vec<f64> = weights.iter().map(|&w| w as f64 / sum as f64).collect();
    assert_shares(&served, &expected, "weights 100..1000");

    let mut fq = FairQueue::new();
    let leaves = [
        fq.add_leaf(FqGroupId::ROOT, 1, BE).unwrap(),
        fq.add_leaf(FqGroupId::ROOT, 10_000, BE).unwrap(),
    ];
    let served = serve_backlogged(&mut fq, &leaves, 1_000_000, || 4096);
    assert_shares(
        &served,
        &[1.0 / 10_001.0, 10_000.0 / 10_001.0],
        "weights 1 and 10000",
    );
}

// Proves the hierarchy multiplies shares: under the root, a group of weight 300 holding leaves
// of weight 100 and 200, beside a leaf of weight 100, gives 0.75 * 1/3, 0.75 * 2/3 and 0.25.
#[test]
fn three_level_hierarchy_gets_products_of_shares() {
    let mut fq = FairQueue::new();
    let parent = fq.add_group(FqGroupId::ROOT, 300, BE).unwrap();
    let leaves = [
        fq.add_leaf(parent, 100, BE).unwrap(),
        fq.add_leaf(parent, 200, BE).unwrap(),
        fq.add_leaf(FqGroupId::ROOT, 100, BE).unwrap(),
    ];
    let mut rng = Rng(11);
    let served = serve_backlogged(&mut fq, &leaves, 200_000, || rng.range(512, 131_072));
    assert_shares(&served, &[0.25, 0.5, 0.25], "hierarchy");

    // One level deeper: the group's first leaf replaced by a subgroup of two equal leaves.
    let mut fq = FairQueue::new();
    let parent = fq.add_group(FqGroupId::ROOT, 300, BE).unwrap();
    let sub = fq.add_group(parent, 100, BE).unwrap();
    let leaves = [
        fq.add_leaf(sub, 500, BE).unwrap(),
        fq.add_leaf(sub, 500, BE).unwrap(),
        fq.add_leaf(parent, 200, BE).unwrap(),
        fq.add_leaf(FqGroupId::ROOT, 100, BE).unwrap(),
    ];
    let mut rng = Rng(12);
    let served = serve_backlogged(&mut fq, &leaves, 200_000, || rng.range(512, 131_072));
    assert_shares(&served, &[0.125, 0.125, 0.5, 0.25], "four levels");
}

// ----- worst-case fairness -----

// Proves the B-WF2Q+ worst-case bounds for N backlogged leaves of equal weight w, between two
// consecutive services of a leaf i (its budget b was served, b' is its next one; Bmax is the
// largest budget; every budget is exactly the service then given):
//
// - equal budgets B: the others receive exactly (N - 1) * B, one budget each (round robin);
// - any budgets: each other leaf j receives at most b_j + Bmax <= 2 * Bmax, and all of them
//   together at most (N - 1) * (b + b') + Bmax.
//
// Why: i was picked at V0 with S_i <= V0 and the smallest F_i = S_i + b/w among the eligible;
// afterwards S_i' = S_i + b/w and F_i' = S_i' + b'/w. A leaf j served before i again was either
// picked while i was not eligible (S_j <= V < S_i', so its slot ended before S_i' + Bmax/w) or
// with F_j <= F_i'; and j started the interval at S_j >= S_i + (b - b_j)/w (otherwise it, not i,
// had the smaller finish at V0). Its service in the interval is w times the distance its start
// moved, so at most b_j + Bmax. The total bound is WF2Q+'s: i's two slots span (b + b')/w of
// virtual time, during which the fluid system gives every other leaf as much as i, and WF2Q+
// runs behind the fluid system by at most one budget.
#[test]
fn equal_weights_wait_at_most_one_budget_per_other_leaf() {
    const BMAX: u64 = 65_536;
    for fixed in [true, false] {
        for n in [2usize, 5, 16, 64] {
            let mut fq = FairQueue::new();
            let leaves: Vec<LeafId> = (0..n)
                .map(|_| fq.add_leaf(FqGroupId::ROOT, 100, BE).unwrap())
                .collect();
            let mut rng = Rng(n as u64 * 31 + 1);
            let draw = |rng: &mut Rng| if fixed { BMAX } else { rng.range(1, BMAX) };
            let mut next: Vec<u64> = (0..n).map(|_| draw(&mut rng)).collect();
            for i in 0..n {
                fq.activate(leaves[i], next[i]).unwrap();
            }
            // received[i][j]: service j received since i's last service.
            let mut received = vec![vec![0u64; n]; n];
            let mut last = vec![0u64; n];
            let mut worst_total = 0f64;
            let mut worst_one = 0u64;
            for round in 0..100_000 {
                let leaf = fq.select_next(0).unwrap();
                let i = leaf.index() as usize - 1;
                if round > 2 * n {
                    let total: u64 = received[i].iter().sum();
                    let bound = if fixed {
                        (n as u64 - 1) * BMAX
                    } else {
                        (n as u64 - 1) * (last[i] + next[i]) + BMAX
                    };
                    assert!(
                        total <= bound,
                        "{n} leaves (fixed {fixed}): others got {total} between two services of \
                         a leaf, bound {bound}"
                    );
                    if fixed {
                        assert_eq!(total, bound, "{n} leaves: equal budgets are round robin");
                    }
                    for &one in &received[i] {
                        assert!(one <= 2 * BMAX, "{n} leaves: one leaf got {one} meanwhile");
                        worst_one = worst_one.max(one);
                    }
                    worst_total = worst_total.max(total as f64 / (n - 1) as f64 / BMAX as f64);
                }
                let service = next[i];
                received[i].iter_mut().for_each(|r| *r = 0);
                for (j, row) in received.iter_mut().enumerate() {
                    if j != i {
                        row[i] += service;
                    }
                }
                fq.charge(leaf, service).unwrap();
                last[i] = service;
                next[i] = draw(&mut rng);
                fq.set_budget(leaf, next[i]).unwrap();
            }
            // The bounds are nearly reached, so the test would notice a looser scheduler.
            if !fixed {
                assert!(worst_one > BMAX * 3 / 2, "{n} leaves: {worst_one}");
                assert!(worst_total > 1.1, "{n} leaves: {worst_total}");
            }
        }
    }
}

// ----- classes -----

// Proves RT is always served before BE, and BE before IDLE, while the idle-class timer has not
// run out, at the root and inside a group.
#[test]
fn rt_before_be_before_idle() {
    let mut fq = FairQueue::new();
    let group = fq.add_group(FqGroupId::ROOT, 100, BE).unwrap();
    let idle = fq.add_leaf(group, 10_000, IoPrioClass::Idle).unwrap();
    let be = fq.add_leaf(group, 1, BE).unwrap();
    let rt = fq.add_leaf(group, 1, IoPrioClass::Rt).unwrap();
    let root_idle = fq
        .add_leaf(FqGroupId::ROOT, 10_000, IoPrioClass::Idle)
        .unwrap();
    for leaf in [idle, be, rt, root_idle] {
        fq.activate(leaf, 4096).unwrap();
    }
    for _ in 0..100 {
        assert_eq!(fq.select_next(0), Some(rt));
        fq.charge(rt, 4096).unwrap();
    }
    fq.deactivate(rt).unwrap();
    for _ in 0..100 {
        assert_eq!(fq.select_next(0), Some(be));
        fq.charge(be, 4096).unwrap();
    }
    fq.deactivate(be).unwrap();
    // Inside the group only IDLE is left, but the group itself is BE at the root: it still
    // goes before the root's IDLE leaf.
    assert_eq!(fq.select_next(0), Some(idle));
    fq.deactivate(idle).unwrap();
    assert_eq!(fq.select_next(0), Some(root_idle));
    fq.deactivate(root_idle).unwrap();
    assert_eq!(fq.select_next(0), None);
}

// Proves the idle class is not starved: with BE always backlogged, an IDLE leaf is served
// exactly once each time more than the timeout (200 ms by default, or as configured) passed
// since the timer last fired, and never otherwise.
#[test]
fn idle_class_is_served_once_per_timeout() {
    for timeout in [DEFAULT_IDLE_CLASS_TIMEOUT, 50 * MILLISECOND] {
        let mut fq = FairQueue::with_config(FqConfig {
            idle_class_timeout: timeout,
            ..FqConfig::default()
        });
        let be = fq.add_leaf(FqGroupId::ROOT, 100, BE).unwrap();
        let idle = fq
            .add_leaf(FqGroupId::ROOT, 100, IoPrioClass::Idle)
            .unwrap();
        fq.activate(be, 4096).unwrap();
        fq.activate(idle, 4096).unwrap();
        let step = MILLISECOND;
        let mut idle_at = Vec::new();
        for ms in 1..=2000u64 {
            let now = ms * step;
            let leaf = fq.select_next(now).unwrap();
            if leaf == idle {
                idle_at.push(now);
            }
            fq.charge(leaf, 4096).unwrap();
        }
        // The timer starts at 0 and fires at the first selection strictly after each deadline.
        let expected: Vec<Nanos> = (1..)
            .map(|k| k * (timeout + step))
            .take_while(|&t| t <= 2000 * step)
            .collect();
        assert_eq!(idle_at, expected, "timeout {timeout}");
    }
}

// ----- the idle tree -----

/// Three backlogged leaves (steady, churner, third); the churner leaves after each of its
/// services and comes back `away` services later. With `forget` it comes back as a new leaf
/// (no memory). Returns the churner's service over the steady leaf's.
fn churn(away: usize, forget: bool) -> f64 {
    let mut fq = FairQueue::new();
    let steady = fq.add_leaf(FqGroupId::ROOT, 100, BE).unwrap();
    let mut churner = fq.add_leaf(FqGroupId::ROOT, 100, BE).unwrap();
    let third = fq.add_leaf(FqGroupId::ROOT, 100, BE).unwrap();
    for leaf in [steady, churner, third] {
        fq.activate(leaf, 65_536).unwrap();
    }
    let (mut steady_got, mut churner_got) = (0u64, 0u64);
    let mut rng = Rng(5);
    let mut back_in: Option<usize> = None;
    for _ in 0..30_000 {
        let leaf = fq.select_next(0).unwrap();
        let service = rng.range(4096, 65_536);
        fq.charge(leaf, service).unwrap();
        if leaf == steady {
            steady_got += service;
        }
        match back_in {
            Some(0) => {
                fq.activate(churner, 65_536).unwrap();
                back_in = None;
            }
            Some(k) => back_in = Some(k - 1),
            None => {}
        }
        if leaf == churner {
            churner_got += service;
            fq.deactivate(churner).unwrap();
            let tags = fq.tags(churner).unwrap();
            if forget {
                fq.remove_leaf(churner).unwrap();
                churner = fq.add_leaf(FqGroupId::ROOT, 100, BE).unwrap();
            }
            if away == 0 {
                fq.activate(churner, 65_536).unwrap();
                if !forget && tags.state == State::Idle {
                    // Back before V passed its finish: it restarts there, not at V.
                    assert_eq!(fq.tags(churner).unwrap().start, tags.finish);
                }
            } else {
                back_in = Some(away - 1);
            }
        }
    }
    churner_got as f64 / steady_got as f64
}

// Proves a leaf that leaves as soon as it is served and comes straight back gets no more than
// a leaf that stays backlogged with the same weight: it restarts from its remembered finish
// (S = max(V, F)). It may get a little less: leaving while its start is behind V (while it was
// owed service) forfeits that credit, as in BFQ and WF2Q+. The idle tree also keeps the place
// of a leaf that is away for a moment: its weight stays in wsum, so V does not run ahead while
// it is gone, and it keeps more of its share than a leaf that is forgotten at once.
#[test]
fn leaving_and_returning_quickly_gains_nothing() {
    let ratio = churn(0, false);
    assert!(
        (0.9..=1.02).contains(&ratio),
        "with the idle tree the churner got {ratio:.3} of the steady leaf's service"
    );
    for away in [1, 2] {
        let (remembered, forgotten) = (churn(away, false), churn(away, true));
        assert!(remembered <= 1.02, "away {away}: {remembered:.3}");
        assert!(
            remembered > forgotten + 0.1,
            "away {away}: remembered {remembered:.3}, forgotten {forgotten:.3}"
        );
    }
}

// Proves idle entities are forgotten once V passes their finish (their weight leaves wsum and
// they restart at V), and that service charged after deactivation still counts.
#[test]
fn idle_entities_are_forgotten_when_v_passes_them() {
    let mut fq = FairQueue::new();
    let a = fq.add_leaf(FqGroupId::ROOT, 100, BE).unwrap();
    let b = fq.add_leaf(FqGroupId::ROOT, 100, BE).unwrap();
    fq.activate(a, 1000).unwrap();
    fq.activate(b, 1000).unwrap();
    assert_eq!(fq.select_next(0), Some(a));
    fq.charge(a, 1000).unwrap();
    fq.deactivate(a).unwrap();
    // a is ahead of V (it consumed 1000/100 while V moved 1000/200): remembered.
    assert_eq!(fq.tags(a).unwrap().state, State::Idle);
    // A completion charged after deactivation moves its remembered finish.
    fq.charge(a, 1000).unwrap();
    let tags = fq.tags(a).unwrap();
    assert_eq!(tags.finish, delta(2000, 100));
    // b is served until V passes a's finish; then a is forgotten.
    while fq.tags(a).unwrap().state == State::Idle {
        assert_eq!(fq.select_next(0), Some(b));
        fq.charge(b, 1000).unwrap();
    }
    assert_eq!(fq.tags(a).unwrap().state, State::Inactive);
    let v = fq.vtime(FqGroupId::ROOT, BE).unwrap();
    assert!(v >= delta(2000, 100));
    fq.activate(a, 1000).unwrap();
    assert_eq!(fq.tags(a).unwrap().start, v);
}

// Proves a group goes idle when its last leaf does, is remembered in its parent's tree, and
// comes back from its remembered finish.
#[test]
fn groups_follow_their_children_in_and_out() {
    let mut fq = FairQueue::new();
    let g = fq.add_group(FqGroupId::ROOT, 100, BE).unwrap();
    let inner = fq.add_leaf(g, 100, BE).unwrap();
    let outer = fq.add_leaf(FqGroupId::ROOT, 100, BE).unwrap();
    assert_eq!(fq.tags(g).unwrap().state, State::Inactive);
    fq.activate(inner, 500).unwrap();
    fq.activate(outer, 500).unwrap();
    let tags = fq.tags(g).unwrap();
    assert_eq!((tags.state, tags.budget), (State::Active, 500));
    assert_eq!(fq.select_next(0), Some(inner));
    fq.charge(inner, 500).unwrap();
    fq.deactivate(inner).unwrap();
    let tags = fq.tags(g).unwrap();
    assert_eq!(tags.state, State::Idle);
    assert_eq!(tags.finish, delta(500, 100));
    fq.activate(inner, 800).unwrap();
    let tags = fq.tags(g).unwrap();
    assert_eq!(
        (tags.state, tags.start, tags.budget),
        (State::Active, delta(500, 100), 800)
    );
    // A group's budget follows its next child.
    fq.set_budget(inner, 300).unwrap();
    assert_eq!(fq.tags(g).unwrap().budget, 300);
}

// ----- bad input and bookkeeping -----

// Proves weights outside cgroup v2's 1..=10000 are refused with an error naming the value, for
// new entities and for changes, and that nothing was created or changed.
#[test]
fn bad_weights_are_refused_naming_the_value() {
    let mut fq = FairQueue::new();
    for bad in [0u32, 10_001, u32::MAX] {
        let err = fq.add_leaf(FqGroupId::ROOT, bad, BE).unwrap_err();
        assert_eq!(err, FqError::Weight(bad));
        assert!(err.to_string().contains(&bad.to_string()), "{err}");
        assert!(err.to_string().contains("1..=10000"), "{err}");
        assert_eq!(
            fq.add_group(FqGroupId::ROOT, bad, BE),
            Err(FqError::Weight(bad))
        );
    }
    assert_eq!(fq.leaf_count(), 0);
    assert_eq!(fq.group_count(), 0);
    let leaf = fq.add_leaf(FqGroupId::ROOT, 1, BE).unwrap();
    assert_eq!(fq.set_weight(leaf, 0), Err(FqError::Weight(0)));
    assert_eq!(fq.set_weight(leaf, 10_001), Err(FqError::Weight(10_001)));
    assert_eq!(fq.weight(leaf), Ok(1));
    fq.set_weight(leaf, 10_000).unwrap();
    assert_eq!(fq.weight(leaf), Ok(10_000));
    assert_eq!(fq.set_weight(FqGroupId::ROOT, 100), Err(FqError::Root));
    assert_eq!(
        FqError::Weight(0).to_string(),
        "weight 0 is outside 1..=10000 (cgroup io.weight)"
    );
}

// Proves removed entities' ids are refused (even after their slot is reused), groups with
// children cannot be removed, slots are recycled, and the capacity is enforced with an error.
#[test]
fn ids_slots_and_capacity() {
    let mut fq = FairQueue::with_config(FqConfig {
        capacity: 4,
        ..FqConfig::default()
    });
    let g = fq.add_group(FqGroupId::ROOT, 100, BE).unwrap();
    let a = fq.add_leaf(g, 100, BE).unwrap();
    let b = fq.add_leaf(g, 100, BE).unwrap();
    assert_eq!(fq.add_leaf(g, 100, BE), Err(FqError::Full { capacity: 4 }));
    assert_eq!(fq.remove_group(g), Err(FqError::GroupNotEmpty(g)));
    assert_eq!(fq.remove_group(FqGroupId::ROOT), Err(FqError::Root));
    fq.activate(a, 10).unwrap();
    fq.remove_leaf(a).unwrap();
    assert_eq!(fq.activate(a, 10), Err(FqError::UnknownLeaf(a)));
    assert_eq!(fq.remove_leaf(a), Err(FqError::UnknownLeaf(a)));
    let c = fq.add_leaf(g, 100, BE).unwrap();
    assert_eq!(c.index(), a.index());
    assert_ne!(c, a);
    assert_eq!(fq.is_active(a), Err(FqError::UnknownLeaf(a)));
    assert_eq!(fq.is_active(c), Ok(false));
    fq.remove_leaf(b).unwrap();
    fq.remove_leaf(c).unwrap();
    fq.remove_group(g).unwrap();
    assert_eq!(fq.add_leaf(g, 100, BE), Err(FqError::UnknownGroup(g)));
    assert_eq!(fq.ents.len(), 4, "slots were reused, not added");
    assert_eq!((fq.leaf_count(), fq.group_count()), (0, 0));
    assert!(!fq.has_active());
    assert_eq!(fq.select_next(0), None);
}

// Proves selection is idempotent (asking twice without a charge names the same leaf) and that
// a tree with nothing eligible jumps V to the smallest start instead of stalling.
#[test]
fn selection_is_stable_and_v_jumps() {
    let mut fq = FairQueue::new();
    let a = fq.add_leaf(FqGroupId::ROOT, 100, BE).unwrap();
    fq.activate(a, 100).unwrap();
    for _ in 0..10 {
        assert_eq!(fq.select_next(0), Some(a));
        assert_eq!(fq.select_next(0), Some(a));
        fq.charge(a, 1_000_000).unwrap();
    }
    // Alone, a's start runs ahead of V by its service; V catches up at each selection.
    assert_eq!(fq.tags(a).unwrap().start, 10 * delta(1_000_000, 100));
    assert_eq!(
        fq.vtime(FqGroupId::ROOT, BE).unwrap(),
        10 * delta(1_000_000, 100)
    );
}

// Proves absurd service values cannot overflow or panic: tags saturate at MAX_TAG (2^82 units
// of service per unit of weight), and the scheduler keeps selecting (saturated ties go to the
// smaller slot).
#[test]
fn absurd_service_saturates_without_panicking() {
    let mut fq = FairQueue::new();
    let a = fq.add_leaf(FqGroupId::ROOT, 1, BE).unwrap();
    let b = fq.add_leaf(FqGroupId::ROOT, 1, BE).unwrap();
    fq.activate(a, u64::MAX).unwrap();
    fq.activate(b, u64::MAX).unwrap();
    for _ in 0..(1 << 20) {
        let leaf = fq.select_next(0).unwrap();
        fq.charge(leaf, u64::MAX).unwrap();
    }
    assert_eq!(fq.tags(a).unwrap().start, MAX_TAG);
    assert_eq!(fq.tags(b).unwrap().finish, MAX_TAG);
    assert_eq!(fq.vtime(FqGroupId::ROOT, BE).unwrap(), MAX_TAG);
    assert_eq!(fq.select_next(0), Some(a));
    fq.deactivate(a).unwrap();
    assert_eq!(fq.select_next(0), Some(b));
}

proptest! {
    // Proves that the reciprocals make the same quotients as a 128-bit division: for any service
    // and any weight a charge can divide by (a weight, or a weight sum up to 2^38), powers of
    // two and 1 included.
    #[test]
    fn reciprocal_division_is_exact(
        service in prop_oneof![any::<u64>(), 0u64..1 << 42],
        divisor in prop_oneof![1u64..=10_000, 1u64..1 << 38, (0u32..38).prop_map(|k| 1u64 << k)],
    ) {
        let by = strength_reduce::StrengthReducedU64::new(divisor);
        prop_assert_eq!(
            tree::delta(service, by),
            ((service as u128) << SERVICE_SHIFT) / divisor as u128
        );
        // V carries the remainders: after n charges it is exactly n * service / wsum.
        let mut tree = tree::Tree::new(0);
        tree.wsum = divisor;
        let service = service >> 24;
        for n in 1..=4u128 {
            // The second charge makes the reciprocal, the third and fourth use it.
            tree.advance(service);
            prop_assert_eq!(
                tree.vtime,
                n * ((service as u128) << SERVICE_SHIFT) / divisor as u128
            );
        }
    }
}
