//! The page query and its cursor.

use super::*;

#[test]
fn a_cursor_names_the_labels_it_was_made_from() {
    let labels = vec![
        ("instance".to_owned(), "a&b=\"c\"\n".to_owned()),
        ("model_name".to_owned(), "m/é".to_owned()),
    ];
    let query = PageQuery {
        limit: 7,
        after: None,
        filter: Filter::default(),
    }
    .next_query(&labels);
    assert!(
        query
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_=&".contains(&b)),
        "{query}"
    );
    let parsed = PageQuery::parse(Some(&query)).unwrap();
    assert_eq!(
        parsed,
        PageQuery {
            limit: 7,
            after: Some(labels),
            filter: Filter::default(),
        }
    );
}

#[test]
fn a_bad_limit_or_cursor_is_refused_and_so_is_a_limit_past_the_maximum() {
    assert_eq!(PageQuery::parse(None).unwrap().limit, DEFAULT_PAGE_GROUPS);
    assert_eq!(
        PageQuery::parse(Some("limit=1000")).unwrap().limit,
        MAX_PAGE_GROUPS
    );
    for query in [
        "limit=0",
        "limit=x",
        "limit=-1",
        "limit=1001",
        "after=%%%",
        "after=e30",
    ] {
        assert!(
            matches!(
                PageQuery::parse(Some(query)),
                Err(HttpError::BadPageQuery(_))
            ),
            "{query}"
        );
    }
}
