//! Tokens of an object's life: an object that others must not outlive, or must be used
//! with alone (a matrix a binding names, the context that made a binding), holds a
//! [`Liveness`]; the others keep its [`Token`]. A token stops upgrading when the object is
//! dropped, and no later object's token equals it (the token keeps its allocation, so no
//! new object takes its address).

use std::sync::{Arc, Weak};

/// A token of a [`Liveness`].
pub type Token = Weak<()>;

/// Held while its object lives.
#[derive(Debug, Default)]
pub struct Liveness(Arc<()>);

impl Liveness {
    /// A token that stops upgrading when this is dropped.
    pub fn token(&self) -> Token {
        Arc::downgrade(&self.0)
    }

    /// Whether `token` is this one's.
    pub fn is(&self, token: &Token) -> bool {
        std::ptr::eq(Arc::as_ptr(&self.0), token.as_ptr())
    }
}
