//! Products of sizes that come from the caller (m · k, m · n, element counts times element
//! bytes), checked: a product that does not fit this platform's `size_t` is
//! `Q4VK_ERROR_INVALID_ARGUMENT` with a message naming the product and its factors, never
//! a wrapped value that a later length check would accept. The one checked product of the
//! crate: the C entry points, the CPU kernels and the checkpoint importers all use it.

use crate::error::{invalid, Result};

/// The product of `factors`, or `InvalidArgument` saying that `what` (the product's
/// name, such as `"m * k"`) overflows, with the factors' values.
pub fn product(what: &str, factors: &[usize]) -> Result<usize> {
    factors
        .iter()
        .try_fold(1usize, |acc, &f| acc.checked_mul(f))
        .ok_or_else(|| {
            let values: Vec<String> = factors.iter().map(usize::to_string).collect();
            invalid!(
                "{what} = {} overflows this platform's size_t",
                values.join(" * ")
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn products_that_fit_are_exact() {
        assert_eq!(product("m * k", &[3, 5]).unwrap(), 15);
        assert_eq!(product("nothing", &[]).unwrap(), 1);
        assert_eq!(product("m * k", &[usize::MAX, 1]).unwrap(), usize::MAX);
    }

    #[test]
    fn overflow_names_the_product_and_its_factors() {
        let big = 1usize << (usize::BITS - 1);
        let err = product("m * k * 4", &[2, big, 4]).unwrap_err();
        let crate::error::Error::InvalidArgument(message) = err else {
            panic!("not InvalidArgument: {err:?}");
        };
        assert!(message.contains("m * k * 4"), "{message}");
        assert!(message.contains(&format!("2 * {big} * 4")), "{message}");
        // A product that wraps to a small value is refused all the same.
        assert!(product("m * k", &[1 << 31, 1 << 33]).is_err());
    }
}
