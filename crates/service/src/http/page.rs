//! Paging of `/status` and `/api/v1/groups`: the query (`?limit=`, `?after=`, and the filters of
//! [`filter`]), the cursor and the page's byte budget. A page lists the groups in ascending label order
//! ([`engine::Engine::snapshot_page`]), at most [`PageQuery::limit`] of them and at most
//! [`PAGE_BYTES`] of rendered response, so a response costs at most [`PAGE_BYTES`] (plus one group
//! when a single group is larger) whatever the number of groups (`docs/RELIABILITY.md`,
//! "Responses").
//!
//! The cursor is opaque to clients: base64url (no padding) of the JSON array of the last shown
//! group's label pairs, `[["instance","a"],["model_name","m"]]`. It needs no URL escaping. The next
//! page lists the groups whose labels sort after it, so a group that arrives or leaves between two
//! requests moves no other group across a page boundary: every group present throughout is listed
//! exactly once.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use super::HttpError;

pub(crate) mod filter;
use filter::Filter;

/// Groups per page when the query gives no `limit`.
pub(crate) const DEFAULT_PAGE_GROUPS: usize = 200;
/// The largest `limit` accepted; a larger one is refused (400) naming it.
pub(crate) const MAX_PAGE_GROUPS: usize = 1000;
/// The most bytes of one rendered page (HTML or JSON). Groups are added while the page stays
/// within it; the first group of a page is always added, so a page exceeds it only when that
/// group alone does (over 2 MiB of labels, far past the default label limits).
pub(crate) const PAGE_BYTES: usize = 2 << 20;

/// A paged request: `?limit=N&after=CURSOR` and the filters ([`filter`]), all optional.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct PageQuery {
    /// Groups on the page: 1 to [`MAX_PAGE_GROUPS`], [`DEFAULT_PAGE_GROUPS`] if not given.
    pub(crate) limit: usize,
    /// The labels of the last group of the previous page; `None` on the first page.
    pub(crate) after: Option<Vec<(String, String)>>,
    /// Which groups are listed: every one without a filter parameter.
    pub(crate) filter: Filter,
}

impl PageQuery {
    /// Parses the raw query string (`None` when the URL has no `?`), form-decoded
    /// (`%7B`, `+`). Unknown parameters are ignored. Errors ([`HttpError::BadPageQuery`], 400):
    /// a `limit` that is not an integer from 1 to [`MAX_PAGE_GROUPS`], an `after` that is not a
    /// cursor this service made, a filter it cannot use ([`Filter::take`]).
    pub(crate) fn parse(query: Option<&str>) -> Result<PageQuery, HttpError> {
        let mut page = PageQuery {
            limit: DEFAULT_PAGE_GROUPS,
            after: None,
            filter: Filter::default(),
        };
        for (name, value) in form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
            match &*name {
                "limit" => {
                    let n: usize =
                        value.parse().ok().filter(|n| *n > 0).ok_or_else(|| {
                            bad(format!("limit={value:?} is not a positive integer"))
                        })?;
                    if n > MAX_PAGE_GROUPS {
                        return Err(bad(format!(
                            "limit={n} is over the maximum of {MAX_PAGE_GROUPS} groups per page; \
                             follow the next-page cursor for more"
                        )));
                    }
                    page.limit = n;
                }
                "after" if !value.is_empty() => page.after = Some(decode_cursor(&value)?),
                name => {
                    page.filter.take(name, &value).map_err(bad)?;
                }
            }
        }
        Ok(page)
    }

    /// The query string of the page after `last` (the last group shown), without the `?`:
    /// the filters (form-encoded), then `limit=N&after=CURSOR`. Safe in a URL and, once `&` is
    /// written `&amp;`, in HTML: form encoding leaves no `<`, `>`, `"` or `'`.
    pub(crate) fn next_query(&self, last: &[(String, String)]) -> String {
        format!(
            "{}limit={}&after={}",
            self.filter.query,
            self.limit,
            encode_cursor(last)
        )
    }

    /// The query string of the first page with the same filters and `limit`.
    pub(crate) fn first_query(&self) -> String {
        format!("{}limit={}", self.filter.query, self.limit)
    }
}

fn bad(message: String) -> HttpError {
    HttpError::BadPageQuery(message)
}

/// The cursor of a group with labels `labels` (see the module documentation).
pub(crate) fn encode_cursor(labels: &[(String, String)]) -> String {
    let json = serde_json::to_string(labels).expect("string pairs serialize");
    URL_SAFE_NO_PAD.encode(json)
}

/// The labels a cursor names. Errors: not base64url, or not a JSON array of string pairs.
fn decode_cursor(cursor: &str) -> Result<Vec<(String, String)>, HttpError> {
    let json = URL_SAFE_NO_PAD
        .decode(cursor)
        .map_err(|e| bad(format!("after is not a cursor from this service: {e}")))?;
    serde_json::from_slice(&json)
        .map_err(|e| bad(format!("after is not a cursor from this service: {e}")))
}

/// Appends rendered groups to a page while it stays within [`PAGE_BYTES`].
#[derive(Debug)]
pub(crate) struct PageFill {
    /// The page so far.
    pub(crate) out: String,
    /// Groups added.
    pub(crate) shown: usize,
    /// Bytes the page's end takes besides the next-page link (closing tags, totals).
    tail: usize,
}

impl PageFill {
    /// A page starting with `head`, whose end (written by the caller after the groups) takes at
    /// most `tail` bytes plus the next-page link.
    pub(crate) fn new(head: String, tail: usize) -> PageFill {
        PageFill {
            out: head,
            shown: 0,
            tail,
        }
    }

    /// Adds `item` (one rendered group, with its separator) if the page stays within
    /// [`PAGE_BYTES`] with it and with a next-page link of `link` bytes after it; the first item
    /// is always added. Returns whether it was added: once not, the page is full.
    pub(crate) fn try_add(&mut self, item: &str, link: usize) -> bool {
        if self.shown > 0 && self.out.len() + item.len() + self.tail + link > PAGE_BYTES {
            return false;
        }
        self.out.push_str(item);
        self.shown += 1;
        true
    }
}

#[cfg(test)]
mod tests;
