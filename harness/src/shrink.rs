//! Delta debugging at the operation level, for every trace form: remove
//! chunks of a list, then try simpler versions of each element.

/// Removes chunks of `items` (halves, quarters, … single items) while
/// `fails` still holds.
pub fn shrink_list<T: Clone>(mut items: Vec<T>, fails: &mut dyn FnMut(&[T]) -> bool) -> Vec<T> {
    let mut chunk = items.len().div_ceil(2).max(1);
    loop {
        let mut i = 0;
        while i < items.len() {
            let mut candidate = items.clone();
            candidate.drain(i..(i + chunk).min(items.len()));
            if fails(&candidate) {
                items = candidate;
            } else {
                i += chunk;
            }
        }
        if chunk == 1 {
            return items;
        }
        chunk = chunk.div_ceil(2);
    }
}

/// Tries smaller versions of one element in place (each `smaller` candidate
/// in turn, repeatedly, while one still fails).
pub fn simplify_each<T: Clone>(
    items: &mut [T],
    smaller: impl Fn(&T) -> Option<T>,
    fails: &mut dyn FnMut(&[T]) -> bool,
) {
    for i in 0..items.len() {
        while let Some(s) = smaller(&items[i]) {
            let mut candidate = items.to_vec();
            candidate[i] = s;
            if !fails(&candidate) {
                break;
            }
            items[i] = candidate.swap_remove(i);
        }
    }
}
