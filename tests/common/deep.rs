//! The deep nested test batch (lists of lists, a list of structs holding a list and a map of
//! lists, and more), written as JSON lines and read by arrow-json.

use std::sync::Arc;

use arrow::datatypes::*;
use arrow::record_batch::RecordBatch;

use super::Rng;

/// A batch nested three and four deep: lists of lists, a list of structs holding a list, a map
/// of lists and a struct, lists of booleans and decimals, a required list of required values;
/// nulls and empty lists at every level. Built from JSON lines by arrow-json.
pub fn deep_nested_batch(rows: usize) -> RecordBatch {
    let item = |t: DataType, nullable: bool| Arc::new(Field::new("item", t, nullable));
    let inner_s = Fields::from(vec![
        Field::new("f", DataType::Float64, true),
        Field::new("b", DataType::Boolean, true),
    ]);
    let map = DataType::Map(
        Arc::new(Field::new(
            "entries",
            DataType::Struct(Fields::from(vec![
                Field::new("keys", DataType::Utf8, false),
                Field::new("values", DataType::List(item(DataType::Int32, true)), true),
            ])),
            false,
        )),
        false,
    );
    let elem = Fields::from(vec![
        Field::new("a", DataType::List(item(DataType::Int64, true)), true),
        Field::new("m", map, true),
        Field::new("s", DataType::Struct(inner_s), true),
    ]);
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new(
            "ll",
            DataType::List(item(DataType::List(item(DataType::Utf8, true)), true)),
            true,
        ),
        Field::new(
            "deep",
            DataType::List(item(DataType::Struct(elem), true)),
            true,
        ),
        Field::new("lb", DataType::List(item(DataType::Boolean, true)), true),
        Field::new(
            "ld",
            DataType::List(item(DataType::Decimal128(20, 3), true)),
            true,
        ),
        Field::new("req", DataType::List(item(DataType::Int32, false)), false),
    ]));
    let mut r = Rng(4242);
    let mut json = String::new();
    for i in 0..rows {
        let mut pick = |n: u64| r.below(n);
        let null = |k: u64| k == 0;
        let ll = if null(pick(7)) {
            "null".to_string()
        } else {
            let outer: Vec<String> = (0..pick(4))
                .map(|j| match pick(5) {
                    0 => "null".to_string(),
                    k => {
                        let v: Vec<String> = (0..k - 1)
                            .map(|x| {
                                if x == 1 {
                                    "null".into()
                                } else {
                                    format!("\"s{i}-{j}-{x}\"")
                                }
                            })
                            .collect();
                        format!("[{}]", v.join(","))
                    }
                })
                .collect();
            format!("[{}]", outer.join(","))
        };
        let deep = if null(pick(6)) {
            "null".to_string()
        } else {
            let elems: Vec<String> = (0..pick(4))
                .map(|j| {
                    if null(pick(9)) {
                        return "null".to_string();
                    }
                    let a = match pick(4) {
                        0 => "null".to_string(),
                        k => format!(
                            "[{}]",
                            (0..k)
                                .map(|x| if x == 2 {
                                    "null".into()
                                } else {
                                    format!("{}", i * 10 + x as usize)
                                })
                                .collect::<Vec<_>>()
                                .join(",")
                        ),
                    };
                    let m = match pick(4) {
                        0 => "null".to_string(),
                        k => format!(
                            "{{{}}}",
                            (0..k - 1)
                                .map(|x| match x {
                                    1 => format!("\"k{x}\":null"),
                                    _ => format!("\"k{x}\":[{j},{x},null]"),
                                })
                                .collect::<Vec<_>>()
                                .join(",")
                        ),
                    };
                    let s = match pick(5) {
                        0 => "null".to_string(),
                        1 => "{\"f\":null,\"b\":null}".to_string(),
                        _ => format!("{{\"f\":{}.5,\"b\":{}}}", i + j as usize, i % 2 == 0),
                    };
                    format!("{{\"a\":{a},\"m\":{m},\"s\":{s}}}")
                })
                .collect();
            format!("[{}]", elems.join(","))
        };
        let lb = match pick(5) {
            0 => "null".to_string(),
            k => format!(
                "[{}]",
                (0..k * 3)
                    .map(|x| match (i + x as usize) % 4 {
                        0 => "null",
                        1 | 2 => "true",
                        _ => "false",
                    })
                    .collect::<Vec<_>>()
                    .join(",")
            ),
        };
        let ld = match pick(4) {
            0 => "null".to_string(),
            k => format!(
                "[{}]",
                (0..k)
                    .map(|x| if x == 1 {
                        "null".into()
                    } else {
                        format!("\"-{i}.{x:03}\"")
                    })
                    .collect::<Vec<_>>()
                    .join(",")
            ),
        };
        let req = format!(
            "[{}]",
            (0..pick(3))
                .map(|x| format!("{}", i as u64 + x))
                .collect::<Vec<_>>()
                .join(",")
        );
        json.push_str(&format!(
            "{{\"id\":{i},\"ll\":{ll},\"deep\":{deep},\"lb\":{lb},\"ld\":{ld},\"req\":{req}}}\n"
        ));
    }
    let mut reader = arrow_json::ReaderBuilder::new(schema.clone())
        .with_batch_size(rows.max(1))
        .build(std::io::Cursor::new(json))
        .unwrap();
    let batch = reader.next().unwrap().unwrap();
    assert_eq!(batch.num_rows(), rows);
    batch
}
