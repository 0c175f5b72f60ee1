//! [`label_enum!`]: an enum whose variants are the values of one Prometheus label (the `reason` of
//! a self-metric), defined once: each variant with its label value, and from that one definition
//! its `ALL` (declaration order), its `index` into per-reason arrays and its `as_str`.

/// Defines a fieldless enum whose variants are the values of a label, each written once with its
/// label value:
///
/// ```
/// vllm_corrector_protocol::label_enum! {
///     /// Why it happened.
///     #[derive(Debug, Clone, Copy, PartialEq, Eq)]
///     pub enum Why {
///         /// It was late.
///         Late => "late",
///         /// It was early.
///         Early => "early",
///     }
/// }
/// assert_eq!(Why::ALL, [Why::Late, Why::Early]);
/// assert_eq!((Why::Early.index(), Why::Early.as_str()), (1, "early"));
/// ```
///
/// It adds `ALL` (every variant, in declaration order, so `ALL[v.index()] == v`), `index` and
/// `as_str`; derives are the caller's. With `nested Name(Inner);` after the enum's braces, where
/// `Inner` is itself such an enum, the enum gets a last variant `Name(Inner)`, `ALL` ends with `Name(i)` for every `i` of `Inner::ALL`, `index` counts
/// on past the enum's own variants, and `as_str` is `Inner`'s label value.
#[macro_export]
macro_rules! label_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident => $label:literal, )+
        }
    ) => {
        $(#[$meta])*
        $vis enum $name {
            $( $(#[$vmeta])* $variant, )+
        }

        impl $name {
            /// Every value, in declaration order: `ALL[v.index()] == v`.
            pub const ALL: [$name; [$($label),+].len()] = [$($name::$variant),+];

            /// The label value.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $( $name::$variant => $label, )+
                }
            }

            /// The position in [`Self::ALL`]: the index into arrays kept per value.
            pub const fn index(self) -> usize {
                self as usize
            }
        }
    };
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident => $label:literal, )+
        }
        $(#[$nmeta:meta])* nested $nested:ident($inner:ty);
    ) => {
        $(#[$meta])*
        $vis enum $name {
            $( $(#[$vmeta])* $variant, )+
            $(#[$nmeta])* $nested($inner),
        }

        impl $name {
            /// Every value, in declaration order, the nested enum's values last:
            /// `ALL[v.index()] == v`.
            pub const ALL: [$name; [$($label),+].len() + <$inner>::ALL.len()] = {
                const OWN: usize = [$($label),+].len();
                let own = [$($name::$variant),+];
                let mut all = [own[0]; OWN + <$inner>::ALL.len()];
                let mut i = 0;
                while i < OWN {
                    all[i] = own[i];
                    i += 1;
                }
                let mut j = 0;
                while j < <$inner>::ALL.len() {
                    all[OWN + j] = $name::$nested(<$inner>::ALL[j]);
                    j += 1;
                }
                all
            };

            /// The label value.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $( $name::$variant => $label, )+
                    $name::$nested(inner) => inner.as_str(),
                }
            }

            /// The position in [`Self::ALL`]: the index into arrays kept per value.
            pub const fn index(self) -> usize {
                let mut i = 0;
                $(
                    if matches!(self, $name::$variant) {
                        return i;
                    }
                    i += 1;
                )+
                match self {
                    $name::$nested(inner) => i + inner.index(),
                    _ => i,
                }
            }
        }
    };
}
