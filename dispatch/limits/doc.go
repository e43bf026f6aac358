// Package limits keeps the fleet's limit keys as one member sees them
// (Table) and prepares the compares and writes that grant their slots in
// the fenced transaction starting an attempt. The protocol and its
// invariants are in docs/ownership.md ("Limit keys").
//
// # Guarantees
//
//   - A grant prepared from the table (Prepare) and applied by etcd
//     never takes a key past its max_running, nor its rate's count in any
//     window of its per as the granting members' clocks measure it: the
//     grant compares the key's state revision the count was read with,
//     and only a grant, which rewrites the state, adds a holder.
//   - Polls that find no room write nothing: the table answers from
//     memory (one watch per member).
//   - Until the table has listed the prefix once, every key counts as
//     bounded with no room: nothing naming a key starts.
//
// # Not guaranteed
//
//   - Fairness among members: two members granting under one key at once
//     conflict, and the one whose compare fails tries again at a later
//     poll.
//   - Rate windows are measured by the granting members' clocks: clock
//     skew between members shifts them by the skew.
//   - Counts lag etcd by the watch's delay: a slot freed elsewhere is
//     seen free a moment later (never the other way round).
package limits
