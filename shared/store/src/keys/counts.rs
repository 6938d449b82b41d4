//! Where a location's live counts sit in its counts string (`k.counts .. <location>`): one signed 64-bit slot per
//! count, as `BITFIELD … INCRBY i64 #<slot>` moves them, so that a function moving several counts of a location
//! (a placement's create moves eight) writes them in one command that reads nothing first, where a hash needs an
//! HMGET and an HSET. The Lua is given the slots from here (`counts_layout`) and the reader decodes them from here
//! (`counts_in`), so the two cannot disagree. The counts are the fleets area's (`fleets/tally.lua`).
//!
//! A count's true value is its slot plus the field of the same name in the location's tally hash
//! (`k.tally .. <location>`), where an earlier release kept every count: counts only ever move by differences, so
//! what that release left there stays a valid base and nothing needs moving over.

/// The counts, in slot order from slot 0 (their meanings: `fleets/tally.lua`), then `hungry` (until when, ms, a
/// placement found no server in the location: see `announce_capacity`).
const COUNT_SLOTS: [&str; 24] = [
    "gs_launching",
    "gs_available",
    "gs_utilized",
    "gs_draining_available",
    "gs_draining_utilized",
    "gs_terminating",
    "gs_unhealthy",
    "slots_free",
    "slots_unhealthy",
    "i_pending",
    "i_active",
    "i_idle",
    "i_draining",
    "i_terminating",
    "activatable",
    "s_activating",
    "s_active",
    "p_open",
    "p_other",
    "seats",
    "players",
    "players_free",
    "lost",
    "hungry",
];

/// After the counts, one window per minute of the hour (minute mod 60), each this many slots: the minute it holds
/// (ms / 60,000), then what add_to_minute sums in it: ms to ready, processes ready, game sessions created, servers
/// lost to interruptions.
const WINDOW_SLOTS: usize = 5;

/// The slots as the Lua uses them: COUNT_SLOT (a count's name → `#<slot>`, BITFIELD's offset in units of the
/// type's width), WINDOW_BASE, the slot where minute 0's window starts, and WINDOW_SLOT (a window's slot → its
/// offset, made once when the library loads rather than at each call).
pub(crate) fn counts_layout() -> String {
    let slots: Vec<String> = COUNT_SLOTS
        .iter()
        .enumerate()
        .map(|(slot, name)| format!("{name} = '#{slot}'"))
        .collect();
    let base = COUNT_SLOTS.len();
    let end = base + 60 * WINDOW_SLOTS - 1;
    format!(
        "local COUNT_SLOT = {{{}}}\nlocal WINDOW_BASE, WINDOW_SLOTS = {base}, {WINDOW_SLOTS}\n\
         local WINDOW_SLOT = {{}}\nfor slot = {base}, {end} do WINDOW_SLOT[slot] = '#' .. slot end\n",
        slots.join(", "),
    )
}

/// What a location's counts string holds: its counts by name (`hungry` left out: it is no count), and its windows
/// as (field, value) in the form the tally hash keeps them, `w<minute mod 60>` = `<minute>|<sums…>`. Slots past the
/// string's end are 0, as BITFIELD reads them.
pub fn counts_in(raw: &[u8]) -> Vec<(String, String)> {
    let slot = |at: usize| -> i64 {
        let mut bytes = [0_u8; 8];
        for (i, byte) in bytes.iter_mut().enumerate() {
            *byte = raw.get(at * 8 + i).copied().unwrap_or(0);
        }
        i64::from_be_bytes(bytes)
    };
    let mut out: Vec<(String, String)> = COUNT_SLOTS
        .iter()
        .enumerate()
        .filter(|(_, name)| **name != "hungry")
        .map(|(at, name)| ((*name).to_owned(), slot(at).to_string()))
        .collect();
    for minute_of_hour in 0..60 {
        let base = COUNT_SLOTS.len() + minute_of_hour * WINDOW_SLOTS;
        let window: Vec<String> = (0..WINDOW_SLOTS).map(|at| slot(base + at).to_string()).collect();
        if window[0] != "0" {
            out.push((format!("w{minute_of_hour}"), window.join("|")));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_read_back_big_endian_and_windows_as_the_hash_keeps_them() {
        let mut raw = vec![0_u8; (COUNT_SLOTS.len() + 3 * WINDOW_SLOTS) * 8];
        let mut put = |slot: usize, value: i64| raw[slot * 8..slot * 8 + 8].copy_from_slice(&value.to_be_bytes());
        put(1, 7);
        put(17, -2);
        put(COUNT_SLOTS.len() + 2 * WINDOW_SLOTS, 29_000_002);
        put(COUNT_SLOTS.len() + 2 * WINDOW_SLOTS + 3, 4);
        let read = counts_in(&raw);
        let value = |name: &str| read.iter().find(|(field, _)| field == name).map(|(_, v)| v.as_str());
        assert_eq!(value("gs_available"), Some("7"));
        assert_eq!(value("p_open"), Some("-2"));
        assert_eq!(value("lost"), Some("0"), "a slot past the string's end reads 0");
        assert_eq!(value("hungry"), None);
        assert_eq!(value("w2"), Some("29000002|0|0|4|0"));
        assert_eq!(value("w1"), None, "a window never written is left out");
        assert!(
            counts_layout().contains("gs_available = '#1'")
                && counts_layout().contains("WINDOW_BASE, WINDOW_SLOTS = 24, 5")
        );
    }
}
