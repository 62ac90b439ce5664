//! The nine TPC-C tables (clause 1.3) and the two secondary indexes: table
//! names, key encodings and fixed-size binary row encodings.
//!
//! # Keys
//!
//! Keys are big-endian composites of the primary-key columns, most
//! significant first, so that the engine's byte order is the key order and
//! range scans walk a district's orders or an order's lines in order:
//! warehouse ids take 2 bytes, district ids and line numbers 1, customer,
//! order and item ids 4.
//!
//! # Rows
//!
//! Every row stores all of the table's columns (the key columns too) in a
//! fixed-size little-endian layout: integers at their width, money as
//! integer cents (`i64`), rates (taxes, discounts) as integer ten-thousandths
//! (`i32`), dates as milliseconds since the Unix epoch (`u64`, 0 for null),
//! a null carrier id as 0, and character columns as [`Text`]: a 2-byte
//! length and the column's full capacity. Fixed sizes mean an updated row
//! always fits in its old version (the engine updates in place) and decoding
//! needs no parsing. The layouts are defined with the `row!` macro, which
//! derives the encoder and decoder from the field list.

use std::ops::Range;

use tessera::{Database, Error, TableId, TxError, TxResult};

/// A character column of capacity `N`: its bytes and their length.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Text<const N: usize> {
    len: u16,
    buf: [u8; N],
}

impl<const N: usize> Text<N> {
    /// The empty string.
    pub const fn empty() -> Self {
        Text {
            len: 0,
            buf: [0; N],
        }
    }

    /// `s`, truncated to `N` bytes.
    pub fn new(s: &[u8]) -> Self {
        let mut t = Self::empty();
        t.set(s);
        t
    }

    /// Replace the value with `s`, truncated to `N` bytes.
    pub fn set(&mut self, s: &[u8]) {
        let n = s.len().min(N);
        self.buf[..n].copy_from_slice(&s[..n]);
        self.buf[n..].fill(0);
        self.len = n as u16;
    }

    /// The bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len as usize]
    }

    /// The value padded with zero bytes to `N` (for keys: zero sorts before
    /// every character, so padded values sort like the strings).
    pub fn padded(&self) -> &[u8; N] {
        &self.buf
    }
}

impl<const N: usize> Default for Text<N> {
    fn default() -> Self {
        Self::empty()
    }
}

impl<const N: usize> std::fmt::Debug for Text<N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self.as_bytes()))
    }
}

/// A column type with a fixed-size encoding.
pub trait Field: Sized {
    /// Encoded size in bytes.
    const SIZE: usize;
    /// Write the encoding into exactly `SIZE` bytes.
    fn put(&self, out: &mut [u8]);
    /// Decode from exactly `SIZE` bytes.
    fn get(b: &[u8]) -> Self;
}

macro_rules! int_field {
    ($($t:ty),*) => {$(
        impl Field for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            #[inline]
            fn put(&self, out: &mut [u8]) {
                out.copy_from_slice(&self.to_le_bytes());
            }
            #[inline]
            fn get(b: &[u8]) -> Self {
                <$t>::from_le_bytes(b.try_into().expect("field width"))
            }
        }
    )*};
}
int_field!(u8, u16, u32, u64, i32, i64);

impl<const N: usize> Field for Text<N> {
    const SIZE: usize = 2 + N;
    #[inline]
    fn put(&self, out: &mut [u8]) {
        out[..2].copy_from_slice(&self.len.to_le_bytes());
        out[2..].copy_from_slice(&self.buf);
    }
    #[inline]
    fn get(b: &[u8]) -> Self {
        let len = u16::from_le_bytes([b[0], b[1]]).min(N as u16);
        let mut buf = [0u8; N];
        buf.copy_from_slice(&b[2..2 + N]);
        Text { len, buf }
    }
}

/// A row with a fixed-size encoding.
pub trait Row: Sized {
    /// Encoded size in bytes.
    const LEN: usize;
    /// Encode into `out` (cleared first; a reused buffer allocates once).
    fn encode(&self, out: &mut Vec<u8>);
    /// Decode; `None` if `b` has the wrong size.
    fn decode(b: &[u8]) -> Option<Self>;
}

/// Decode a row read in a transaction; a malformed row is a real error.
pub fn decode<T: Row>(b: &[u8], table: &str) -> TxResult<T> {
    T::decode(b).ok_or_else(|| malformed::<T>(b, table))
}

/// The error for a `table` row `b` that is not a `T` (wrong size).
pub fn malformed<T: Row>(b: &[u8], table: &str) -> TxError {
    TxError::Error(Error::InvalidArgument(format!(
        "malformed {table} row of {} bytes (expected {})",
        b.len(),
        T::LEN
    )))
}

/// The error for a row too short to hold the column a column read asked
/// for (`column` of `table`).
pub fn short_row(table: &str, column: &str) -> TxError {
    TxError::Error(Error::InvalidArgument(format!(
        "malformed {table} row: too short to hold {column}"
    )))
}

/// Define a row struct and derive its [`Row`] encoding from the field list:
/// the fields are laid out in declaration order.
macro_rules! row {
    ($(#[$m:meta])* pub struct $name:ident { $($(#[$fm:meta])* pub $f:ident : $t:ty,)* }) => {
        $(#[$m])*
        // Columns carry the spec's names (clause 1.3); only encodings that
        // need saying are documented.
        #[allow(missing_docs)]
        #[derive(Clone, Debug, PartialEq, Eq, Default)]
        pub struct $name { $($(#[$fm])* pub $f: $t,)* }

        impl Row for $name {
            const LEN: usize = 0 $(+ <$t as Field>::SIZE)*;

            // Fields go to fixed offsets of a fixed-size array (no capacity
            // check per field, no bounds check per field: the offsets are
            // constants within the array's length).
            fn encode(&self, out: &mut Vec<u8>) {
                out.clear();
                out.resize(Self::LEN, 0);
                let b: &mut [u8; <$name as Row>::LEN] =
                    (&mut out[..]).try_into().expect("resized to LEN");
                let mut _p = 0;
                $(
                    Field::put(&self.$f, &mut b[_p.._p + <$t as Field>::SIZE]);
                    _p += <$t as Field>::SIZE;
                )*
            }

            fn decode(b: &[u8]) -> Option<Self> {
                let b: &[u8; <$name as Row>::LEN] = b.try_into().ok()?;
                let mut _p = 0;
                $(
                    let $f = <$t as Field>::get(&b[_p.._p + <$t as Field>::SIZE]);
                    _p += <$t as Field>::SIZE;
                )*
                Some($name { $($f,)* })
            }
        }
    };
}

row! {
    /// WAREHOUSE (clause 1.3.1).
    pub struct Warehouse {
        pub w_id: u16,
        pub w_name: Text<10>,
        pub w_street_1: Text<20>,
        pub w_street_2: Text<20>,
        pub w_city: Text<20>,
        pub w_state: Text<2>,
        pub w_zip: Text<9>,
        /// Ten-thousandths.
        pub w_tax: i32,
        /// Cents.
        pub w_ytd: i64,
    }
}

row! {
    /// DISTRICT (clause 1.3.2).
    pub struct District {
        pub d_id: u8,
        pub d_w_id: u16,
        pub d_name: Text<10>,
        pub d_street_1: Text<20>,
        pub d_street_2: Text<20>,
        pub d_city: Text<20>,
        pub d_state: Text<2>,
        pub d_zip: Text<9>,
        /// Ten-thousandths.
        pub d_tax: i32,
        /// Cents.
        pub d_ytd: i64,
        pub d_next_o_id: u32,
    }
}

row! {
    /// CUSTOMER (clause 1.3.3).
    pub struct Customer {
        pub c_id: u32,
        pub c_d_id: u8,
        pub c_w_id: u16,
        pub c_first: Text<16>,
        pub c_middle: Text<2>,
        pub c_last: Text<16>,
        pub c_street_1: Text<20>,
        pub c_street_2: Text<20>,
        pub c_city: Text<20>,
        pub c_state: Text<2>,
        pub c_zip: Text<9>,
        pub c_phone: Text<16>,
        /// Milliseconds since the Unix epoch.
        pub c_since: u64,
        /// "GC" or "BC".
        pub c_credit: Text<2>,
        /// Cents.
        pub c_credit_lim: i64,
        /// Ten-thousandths.
        pub c_discount: i32,
        /// Cents.
        pub c_balance: i64,
        /// Cents.
        pub c_ytd_payment: i64,
        pub c_payment_cnt: u32,
        pub c_delivery_cnt: u32,
        pub c_data: Text<500>,
    }
}

/// Column offsets in encoded rows, for the column reads and writes
/// (`get_slice`, `update_slice`) of the transactions that change a few
/// columns of a wide row (checked against the encoding by a test).
impl Warehouse {
    /// W_YTD (i64), which Payment adds to.
    pub const YTD: Range<usize> = 99..107;
}

impl District {
    /// D_YTD (i64), which Payment adds to.
    pub const YTD: Range<usize> = 100..108;
    /// D_NEXT_O_ID (u32), which NewOrder takes and increments.
    pub const NEXT_O_ID: Range<usize> = 108..112;
}

impl Customer {
    /// C_BALANCE, C_YTD_PAYMENT (i64 each) and C_PAYMENT_CNT (u32):
    /// Payment's changes (with C_DATA for a bad-credit customer).
    pub const PAYMENT: Range<usize> = 170..190;
    /// C_BALANCE (i64), which Delivery adds to.
    pub const BALANCE: Range<usize> = 170..178;
    /// C_DELIVERY_CNT (u32), which Delivery increments.
    pub const DELIVERY_CNT: Range<usize> = 190..194;
    /// C_DATA (a `Text<500>`: length, then the bytes).
    pub const DATA: Range<usize> = 194..Self::LEN;
}

impl Order {
    /// O_CARRIER_ID (u8), which Delivery sets.
    pub const CARRIER_ID: Range<usize> = 19..20;
}

row! {
    /// HISTORY (clause 1.3.4). The spec gives it no primary key; see
    /// [`history_key`].
    pub struct History {
        pub h_c_id: u32,
        pub h_c_d_id: u8,
        pub h_c_w_id: u16,
        pub h_d_id: u8,
        pub h_w_id: u16,
        /// Milliseconds since the Unix epoch.
        pub h_date: u64,
        /// Cents.
        pub h_amount: i64,
        pub h_data: Text<24>,
    }
}

row! {
    /// NEW-ORDER (clause 1.3.5).
    pub struct NewOrder {
        pub no_o_id: u32,
        pub no_d_id: u8,
        pub no_w_id: u16,
    }
}

row! {
    /// ORDER (clause 1.3.6).
    pub struct Order {
        pub o_id: u32,
        pub o_d_id: u8,
        pub o_w_id: u16,
        pub o_c_id: u32,
        /// Milliseconds since the Unix epoch.
        pub o_entry_d: u64,
        /// 1..=10; 0 is null (not delivered).
        pub o_carrier_id: u8,
        pub o_ol_cnt: u8,
        /// 1 if every line is supplied by the home warehouse.
        pub o_all_local: u8,
    }
}

row! {
    /// ORDER-LINE (clause 1.3.7).
    pub struct OrderLine {
        pub ol_o_id: u32,
        pub ol_d_id: u8,
        pub ol_w_id: u16,
        pub ol_number: u8,
        pub ol_i_id: u32,
        pub ol_supply_w_id: u16,
        /// Milliseconds since the Unix epoch; 0 is null (not delivered).
        pub ol_delivery_d: u64,
        pub ol_quantity: u8,
        /// Cents.
        pub ol_amount: i64,
        pub ol_dist_info: Text<24>,
    }
}

impl OrderLine {
    /// The bytes of OL_I_ID in an encoded row (after OL_O_ID u32, OL_D_ID
    /// u8, OL_W_ID u16, OL_NUMBER u8): StockLevel's scan reads only these
    /// (`ScanOptions::slice`).
    pub const I_ID: Range<usize> = 8..12;
    /// The bytes of OL_DELIVERY_D (u64), which Delivery writes.
    pub const DELIVERY_D: Range<usize> = 14..22;
    /// The bytes of OL_AMOUNT (i64), which Delivery sums.
    pub const AMOUNT: Range<usize> = 23..31;

    /// OL_I_ID from the bytes [`OrderLine::I_ID`] of a row; `None` if the
    /// slice is short (so was the row).
    pub fn i_id_at(b: &[u8]) -> Option<u32> {
        Some(u32::from_le_bytes(b.try_into().ok()?))
    }
}

row! {
    /// ITEM (clause 1.3.8).
    pub struct Item {
        pub i_id: u32,
        pub i_im_id: u32,
        pub i_name: Text<24>,
        /// Cents.
        pub i_price: i64,
        pub i_data: Text<50>,
    }
}

row! {
    /// STOCK (clause 1.3.9).
    pub struct Stock {
        pub s_i_id: u32,
        pub s_w_id: u16,
        pub s_quantity: i32,
        // The columns NewOrder changes, next to S_QUANTITY so that one
        // column write covers them all (the spec fixes no column order).
        pub s_ytd: u32,
        pub s_order_cnt: u32,
        pub s_remote_cnt: u32,
        pub s_dist_01: Text<24>,
        pub s_dist_02: Text<24>,
        pub s_dist_03: Text<24>,
        pub s_dist_04: Text<24>,
        pub s_dist_05: Text<24>,
        pub s_dist_06: Text<24>,
        pub s_dist_07: Text<24>,
        pub s_dist_08: Text<24>,
        pub s_dist_09: Text<24>,
        pub s_dist_10: Text<24>,
        pub s_data: Text<50>,
    }
}

impl Stock {
    /// The bytes of S_QUANTITY in an encoded row (after S_I_ID u32 and
    /// S_W_ID u16): StockLevel reads only these of its ~200 rows
    /// (`get_slice`), as Silo's StockLevel uses only this column.
    pub const QUANTITY: Range<usize> = 6..10;

    /// S_QUANTITY from the bytes [`Stock::QUANTITY`] of a row; `None` if
    /// the slice is short (so was the row).
    pub fn quantity_at(b: &[u8]) -> Option<i32> {
        Some(i32::from_le_bytes(b.try_into().ok()?))
    }

    /// The bytes of S_YTD, S_ORDER_CNT and S_REMOTE_CNT (three u32) in an
    /// encoded row, right after S_QUANTITY: with it, all that NewOrder
    /// changes in a stock row (it writes just these 16 bytes,
    /// `update_slice`).
    pub const COUNTS: Range<usize> = 10..22;

    /// The bytes of S_DATA in an encoded row.
    pub const DATA: Range<usize> = 282..Self::LEN;

    /// The bytes of S_DIST_xx for district `d` in `1..=10` in an encoded
    /// row.
    pub fn dist_at(d: u8) -> Range<usize> {
        let start = 22 + 26 * (d.clamp(1, 10) as usize - 1);
        start..start + 26
    }

    /// S_DIST_xx for district `d` in `1..=10`.
    pub fn dist(&self, d: u8) -> &Text<24> {
        match d {
            1 => &self.s_dist_01,
            2 => &self.s_dist_02,
            3 => &self.s_dist_03,
            4 => &self.s_dist_04,
            5 => &self.s_dist_05,
            6 => &self.s_dist_06,
            7 => &self.s_dist_07,
            8 => &self.s_dist_08,
            9 => &self.s_dist_09,
            _ => &self.s_dist_10,
        }
    }

    /// Mutable S_DIST_xx for district `d` in `1..=10`.
    pub fn dist_mut(&mut self, d: u8) -> &mut Text<24> {
        match d {
            1 => &mut self.s_dist_01,
            2 => &mut self.s_dist_02,
            3 => &mut self.s_dist_03,
            4 => &mut self.s_dist_04,
            5 => &mut self.s_dist_05,
            6 => &mut self.s_dist_06,
            7 => &mut self.s_dist_07,
            8 => &mut self.s_dist_08,
            9 => &mut self.s_dist_09,
            _ => &mut self.s_dist_10,
        }
    }
}

// The three TPC-CH tables TPC-C-hybrid adds (CH-benCHmark's SUPPLIER, NATION
// and REGION, after TPC-H's). Only `tpcc::hybrid` creates and loads them.

row! {
    /// SUPPLIER (CH-benCHmark; 10,000 rows, keys 0..=9999). Supplies the
    /// STOCK rows `(w, i)` with `(w * i) mod 10000 = su_suppkey`.
    pub struct Supplier {
        pub su_suppkey: u16,
        pub su_name: Text<25>,
        pub su_address: Text<40>,
        /// A [`Nation`]'s `n_nationkey`.
        pub su_nationkey: u8,
        pub su_phone: Text<15>,
        /// Cents.
        pub su_acctbal: i64,
        pub su_comment: Text<100>,
    }
}

row! {
    /// NATION (CH-benCHmark; 62 rows keyed by the ASCII codes of `0-9A-Za-z`).
    pub struct Nation {
        pub n_nationkey: u8,
        pub n_name: Text<25>,
        /// A [`Region`]'s `r_regionkey`.
        pub n_regionkey: u8,
        pub n_comment: Text<152>,
    }
}

row! {
    /// REGION (CH-benCHmark, as TPC-H; 5 rows, keys 0..=4).
    pub struct Region {
        pub r_regionkey: u8,
        pub r_name: Text<25>,
        pub r_comment: Text<152>,
    }
}

// ---------------------------------------------------------------------------
// Keys

/// WAREHOUSE: `w_id`.
#[inline]
pub fn warehouse_key(w: u16) -> [u8; 2] {
    w.to_be_bytes()
}

/// DISTRICT: `(w_id, d_id)`.
#[inline]
pub fn district_key(w: u16, d: u8) -> [u8; 3] {
    let w = w.to_be_bytes();
    [w[0], w[1], d]
}

/// A `(w, d)` prefix followed by a big-endian `u32`.
#[inline]
fn wd_u32(w: u16, d: u8, x: u32) -> [u8; 7] {
    let mut k = [0u8; 7];
    k[..3].copy_from_slice(&district_key(w, d));
    k[3..].copy_from_slice(&x.to_be_bytes());
    k
}

/// CUSTOMER: `(w_id, d_id, c_id)`.
#[inline]
pub fn customer_key(w: u16, d: u8, c: u32) -> [u8; 7] {
    wd_u32(w, d, c)
}

/// Length of a [`customer_name_key`].
pub const CUSTOMER_NAME_KEY_LEN: usize = 3 + 16 + 16 + 4;

/// The CUSTOMER secondary index, `customer_by_name`:
/// `(w_id, d_id, c_last, c_first, c_id)` with the names zero-padded to 16
/// bytes, so one district's customers of one last name are contiguous and
/// sorted by first name (clause 2.5.2.2). `c_id` makes the key unique (two
/// customers may share both names); the value is empty.
pub fn customer_name_key(
    w: u16,
    d: u8,
    last: &Text<16>,
    first: &Text<16>,
    c: u32,
) -> [u8; CUSTOMER_NAME_KEY_LEN] {
    let mut k = [0u8; CUSTOMER_NAME_KEY_LEN];
    k[..3].copy_from_slice(&district_key(w, d));
    k[3..19].copy_from_slice(last.padded());
    k[19..35].copy_from_slice(first.padded());
    k[35..].copy_from_slice(&c.to_be_bytes());
    k
}

/// The inclusive key range of `customer_by_name` holding the customers of
/// district `(w, d)` with last name `last`.
pub fn customer_name_range(
    w: u16,
    d: u8,
    last: &Text<16>,
) -> ([u8; CUSTOMER_NAME_KEY_LEN], [u8; CUSTOMER_NAME_KEY_LEN]) {
    let mut lo = [0u8; CUSTOMER_NAME_KEY_LEN];
    lo[..3].copy_from_slice(&district_key(w, d));
    lo[3..19].copy_from_slice(last.padded());
    let mut hi = lo;
    hi[19..].fill(0xff);
    (lo, hi)
}

/// The `c_id` at the end of a `customer_by_name` key.
#[inline]
pub fn customer_name_key_c_id(k: &[u8]) -> u32 {
    u32::from_be_bytes(k[35..39].try_into().expect("customer_by_name key"))
}

/// HISTORY has no primary key in the spec; ours is `(origin, seq)`: origin 0
/// is the loader (seq packs the customer's `w, d, c` in 48 bits), every
/// driver thread of every run takes a fresh origin from a counter in
/// [`super::Tpcc`] and counts its own inserts. Unique without a shared
/// counter on the hot path, and each thread appends to its own key range (no
/// insert contention). Eight bytes (origin u16, seq u48, big-endian), so
/// that the key is compared as one word and lives in its index slot (a
/// 12-byte key made every HISTORY insert break prefix ties by memcmp).
#[inline]
pub fn history_key(origin: u16, seq: u64) -> [u8; 8] {
    debug_assert!(seq < 1 << 48, "HISTORY sequence {seq} past 48 bits");
    ((origin as u64) << 48 | (seq & ((1 << 48) - 1))).to_be_bytes()
}

/// NEW-ORDER: `(w_id, d_id, o_id)`.
#[inline]
pub fn new_order_key(w: u16, d: u8, o: u32) -> [u8; 7] {
    wd_u32(w, d, o)
}

/// ORDER: `(w_id, d_id, o_id)`.
#[inline]
pub fn order_key(w: u16, d: u8, o: u32) -> [u8; 7] {
    wd_u32(w, d, o)
}

/// The `u32` (order id) at the end of a 7-byte `(w, d, id)` key.
#[inline]
pub fn wd_key_id(k: &[u8]) -> u32 {
    u32::from_be_bytes(k[3..7].try_into().expect("(w, d, id) key"))
}

/// The ORDER secondary index, `order_by_customer`: `(w_id, d_id, c_id,
/// o_id)`, value empty. A reverse scan of one customer's range with limit 1
/// finds their latest order (OrderStatus, clause 2.6.2.2).
#[inline]
pub fn order_customer_key(w: u16, d: u8, c: u32, o: u32) -> [u8; 11] {
    let mut k = [0u8; 11];
    k[..7].copy_from_slice(&customer_key(w, d, c));
    k[7..].copy_from_slice(&o.to_be_bytes());
    k
}

/// The `o_id` at the end of an `order_by_customer` key.
#[inline]
pub fn order_customer_key_o_id(k: &[u8]) -> u32 {
    u32::from_be_bytes(k[7..11].try_into().expect("order_by_customer key"))
}

/// ORDER-LINE: `(w_id, d_id, o_id, ol_number)`.
#[inline]
pub fn order_line_key(w: u16, d: u8, o: u32, ol: u8) -> [u8; 8] {
    let mut k = [0u8; 8];
    k[..7].copy_from_slice(&wd_u32(w, d, o));
    k[7] = ol;
    k
}

/// ITEM: `i_id`.
#[inline]
pub fn item_key(i: u32) -> [u8; 4] {
    i.to_be_bytes()
}

/// STOCK: `(w_id, i_id)`.
#[inline]
pub fn stock_key(w: u16, i: u32) -> [u8; 6] {
    let mut k = [0u8; 6];
    k[..2].copy_from_slice(&w.to_be_bytes());
    k[2..].copy_from_slice(&i.to_be_bytes());
    k
}

/// SUPPLIER: `su_suppkey`.
#[inline]
pub fn supplier_key(s: u16) -> [u8; 2] {
    s.to_be_bytes()
}

/// NATION: `n_nationkey`.
#[inline]
pub fn nation_key(n: u8) -> [u8; 1] {
    [n]
}

/// REGION: `r_regionkey`.
#[inline]
pub fn region_key(r: u8) -> [u8; 1] {
    [r]
}

// ---------------------------------------------------------------------------
// Tables

/// Table names, in creation order.
pub const TABLE_NAMES: [&str; 11] = [
    "warehouse",
    "district",
    "customer",
    "customer_by_name",
    "history",
    "new_order",
    "order",
    "order_by_customer",
    "order_line",
    "item",
    "stock",
];

/// The ids of the TPC-C tables and indexes in one database.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tables {
    /// WAREHOUSE.
    pub warehouse: TableId,
    /// DISTRICT.
    pub district: TableId,
    /// CUSTOMER.
    pub customer: TableId,
    /// Secondary index on CUSTOMER: [`customer_name_key`].
    pub customer_by_name: TableId,
    /// HISTORY.
    pub history: TableId,
    /// NEW-ORDER.
    pub new_order: TableId,
    /// ORDER.
    pub order: TableId,
    /// Secondary index on ORDER: [`order_customer_key`].
    pub order_by_customer: TableId,
    /// ORDER-LINE.
    pub order_line: TableId,
    /// ITEM.
    pub item: TableId,
    /// STOCK.
    pub stock: TableId,
}

impl Tables {
    fn from_fn(
        mut f: impl FnMut(&'static str, bool) -> Result<TableId, Error>,
    ) -> Result<Tables, Error> {
        Ok(Tables {
            warehouse: f("warehouse", false)?,
            district: f("district", false)?,
            customer: f("customer", false)?,
            customer_by_name: f("customer_by_name", true)?,
            history: f("history", false)?,
            new_order: f("new_order", false)?,
            order: f("order", false)?,
            order_by_customer: f("order_by_customer", true)?,
            order_line: f("order_line", false)?,
            item: f("item", false)?,
            stock: f("stock", false)?,
        })
    }

    /// Create the tables and indexes (an error if one exists already).
    pub fn create(db: &Database) -> Result<Tables, Error> {
        Self::from_fn(|name, index| {
            if index {
                db.create_index(name)
            } else {
                db.create_table(name)
            }
        })
    }

    /// Look up the tables of a loaded database.
    pub fn open(db: &Database) -> Result<Tables, Error> {
        Self::from_fn(|name, _| db.table(name))
    }
}

/// Names of the TPC-C-hybrid tables, in creation order.
pub const HYBRID_TABLE_NAMES: [&str; 3] = ["supplier", "nation", "region"];

/// The ids of the three tables TPC-C-hybrid adds to the TPC-C ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HybridTables {
    /// SUPPLIER.
    pub supplier: TableId,
    /// NATION.
    pub nation: TableId,
    /// REGION.
    pub region: TableId,
}

impl HybridTables {
    fn from_fn(
        mut f: impl FnMut(&'static str) -> Result<TableId, Error>,
    ) -> Result<HybridTables, Error> {
        Ok(HybridTables {
            supplier: f("supplier")?,
            nation: f("nation")?,
            region: f("region")?,
        })
    }

    /// Create the tables (an error if one exists already).
    pub fn create(db: &Database) -> Result<HybridTables, Error> {
        Self::from_fn(|name| db.create_table(name))
    }

    /// Look up the tables of a loaded database.
    pub fn open(db: &Database) -> Result<HybridTables, Error> {
        Self::from_fn(|name| db.table(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t<const N: usize>(s: &str) -> Text<N> {
        Text::new(s.as_bytes())
    }

    #[test]
    fn text_truncates_and_pads() {
        let x: Text<4> = t("abcdef");
        assert_eq!(x.as_bytes(), b"abcd");
        let y: Text<4> = t("ab");
        assert_eq!(y.padded(), b"ab\0\0");
        assert_eq!(format!("{y:?}"), "\"ab\"");
    }

    #[test]
    fn single_columns_read_as_the_full_decode_does() {
        let st = Stock {
            s_i_id: 77_777,
            s_w_id: 513,
            s_quantity: -12_345,
            s_ytd: 9,
            s_data: t("ORIGINAL stock"),
            ..Stock::default()
        };
        let mut b = Vec::new();
        st.encode(&mut b);
        assert_eq!(Stock::quantity_at(&b[Stock::QUANTITY]), Some(-12_345));
        assert_eq!(Stock::quantity_at(&b[Stock::QUANTITY.start..8]), None);
        let ol = OrderLine {
            ol_o_id: 3001,
            ol_d_id: 7,
            ol_w_id: 2,
            ol_number: 15,
            ol_i_id: 99_999,
            ol_supply_w_id: 3,
            ol_amount: 123,
            ..OrderLine::default()
        };
        ol.encode(&mut b);
        assert_eq!(OrderLine::i_id_at(&b[OrderLine::I_ID]), Some(99_999));
        assert_eq!(OrderLine::decode(&b).map(|l| l.ol_i_id), Some(99_999));
        assert_eq!(OrderLine::i_id_at(&b[9..12]), None);
    }

    #[test]
    fn rows_round_trip_with_fixed_sizes() {
        let c = Customer {
            c_id: 2999,
            c_d_id: 10,
            c_w_id: 65535,
            c_first: t("Firstname12345"),
            c_middle: t("OE"),
            c_last: t("EINGEINGEING"),
            c_phone: t("0123456789012345"),
            c_since: 1_700_000_000_000,
            c_credit: t("BC"),
            c_credit_lim: 5_000_000,
            c_discount: 4999,
            c_balance: -1000,
            c_ytd_payment: 1000,
            c_payment_cnt: 1,
            c_delivery_cnt: 7,
            c_data: Text::new(&[b'x'; 600]),
            ..Default::default()
        };
        let mut buf = Vec::new();
        c.encode(&mut buf);
        assert_eq!(buf.len(), Customer::LEN);
        let d = Customer::decode(&buf).unwrap();
        assert_eq!(d, c);
        assert_eq!(d.c_data.as_bytes().len(), 500);
        assert!(Customer::decode(&buf[1..]).is_none());

        let mut s = Stock {
            s_i_id: 100_000,
            s_w_id: 3,
            s_quantity: -5,
            s_ytd: 9,
            s_data: t("fooORIGINALbar"),
            ..Default::default()
        };
        for d in 1..=10u8 {
            s.dist_mut(d).set(format!("dist{d:02}").as_bytes());
        }
        s.encode(&mut buf);
        let s2 = Stock::decode(&buf).unwrap();
        assert_eq!(s2, s);
        assert_eq!(s2.dist(7).as_bytes(), b"dist07");

        let ol = OrderLine {
            ol_o_id: 7,
            ol_d_id: 2,
            ol_w_id: 1,
            ol_number: 15,
            ol_i_id: 42,
            ol_supply_w_id: 2,
            ol_delivery_d: 0,
            ol_quantity: 5,
            ol_amount: 999_999,
            ol_dist_info: t("abcdefghijklmnopqrstuvwx"),
        };
        ol.encode(&mut buf);
        assert_eq!(OrderLine::decode(&buf).unwrap(), ol);
        for (len, exp) in [
            (Warehouse::LEN, 2 + 12 + 22 * 3 + 4 + 11 + 4 + 8),
            (NewOrder::LEN, 7),
            (Order::LEN, 4 + 1 + 2 + 4 + 8 + 3),
            (Item::LEN, 4 + 4 + 26 + 8 + 52),
        ] {
            assert_eq!(len, exp);
        }
        let w = Warehouse {
            w_id: 9,
            w_tax: 2000,
            w_ytd: 30_000_000,
            ..Default::default()
        };
        w.encode(&mut buf);
        assert_eq!(Warehouse::decode(&buf).unwrap(), w);
        assert!(decode::<Warehouse>(&buf[..3], "warehouse").is_err());
    }

    /// The column offsets that NewOrder and StockLevel read and write by
    /// hand (`get_slice`, `update_slice`) are those of the encoding.
    #[test]
    fn stock_column_offsets_match_the_encoding() {
        let mut st = Stock {
            s_i_id: 1,
            s_w_id: 2,
            s_quantity: -77,
            s_ytd: 0x0102_0304,
            s_order_cnt: 0x0506_0708,
            s_remote_cnt: 0x090a_0b0c,
            s_data: Text::new(b"some ORIGINAL data"),
            ..Default::default()
        };
        for d in 1..=10u8 {
            *st.dist_mut(d) = Text::new(format!("district {d:02} info").as_bytes());
        }
        let mut buf = Vec::new();
        st.encode(&mut buf);
        assert_eq!(buf.len(), Stock::LEN);
        assert_eq!(Stock::quantity_at(&buf[Stock::QUANTITY]), Some(-77));
        let mut counts = Vec::new();
        for x in [st.s_ytd, st.s_order_cnt, st.s_remote_cnt] {
            counts.extend_from_slice(&x.to_le_bytes());
        }
        assert_eq!(&buf[Stock::COUNTS], &counts[..]);
        assert_eq!(Text::<50>::get(&buf[Stock::DATA]), st.s_data);
        for d in 1..=10u8 {
            assert_eq!(Text::<24>::get(&buf[Stock::dist_at(d)]), *st.dist(d), "{d}");
        }
    }

    /// The same for the other tables' column constants.
    #[test]
    fn column_offsets_match_the_encoding() {
        let mut buf = Vec::new();
        let wh = Warehouse {
            w_tax: 1234,
            w_ytd: -0x0102_0304_0506,
            ..Default::default()
        };
        wh.encode(&mut buf);
        assert_eq!(&buf[Warehouse::YTD], &wh.w_ytd.to_le_bytes());
        let d = District {
            d_ytd: 0x1122_3344_5566,
            d_next_o_id: 0xA1B2_C3D4,
            ..Default::default()
        };
        d.encode(&mut buf);
        assert_eq!(&buf[District::YTD], &d.d_ytd.to_le_bytes());
        assert_eq!(&buf[District::NEXT_O_ID], &d.d_next_o_id.to_le_bytes());
        let c = Customer {
            c_balance: -0x0A0B_0C0D,
            c_ytd_payment: 0x1A1B_1C1D,
            c_payment_cnt: 0x2A2B_2C2D,
            c_delivery_cnt: 0x3A3B_3C3D,
            c_data: Text::new(b"the customer's data"),
            ..Default::default()
        };
        c.encode(&mut buf);
        let mut pay = Vec::new();
        pay.extend_from_slice(&c.c_balance.to_le_bytes());
        pay.extend_from_slice(&c.c_ytd_payment.to_le_bytes());
        pay.extend_from_slice(&c.c_payment_cnt.to_le_bytes());
        assert_eq!(&buf[Customer::PAYMENT], &pay[..]);
        assert_eq!(&buf[Customer::BALANCE], &c.c_balance.to_le_bytes());
        assert_eq!(
            &buf[Customer::DELIVERY_CNT],
            &c.c_delivery_cnt.to_le_bytes()
        );
        assert_eq!(Text::<500>::get(&buf[Customer::DATA]), c.c_data);
        let o = Order {
            o_carrier_id: 7,
            o_ol_cnt: 9,
            ..Default::default()
        };
        o.encode(&mut buf);
        assert_eq!(&buf[Order::CARRIER_ID], &[7]);
        let ol = OrderLine {
            ol_i_id: 0x0102_0304,
            ol_delivery_d: 0x1112_1314_1516,
            ol_quantity: 3,
            ol_amount: -0x2122_2324,
            ..Default::default()
        };
        ol.encode(&mut buf);
        assert_eq!(OrderLine::i_id_at(&buf[OrderLine::I_ID]), Some(ol.ol_i_id));
        assert_eq!(&buf[OrderLine::DELIVERY_D], &ol.ol_delivery_d.to_le_bytes());
        assert_eq!(&buf[OrderLine::AMOUNT], &ol.ol_amount.to_le_bytes());
    }

    #[test]
    fn keys_sort_like_their_columns() {
        // Big-endian composites: byte order is tuple order.
        assert!(order_key(1, 2, 300) < order_key(1, 2, 301));
        assert!(order_key(1, 2, u32::MAX) < order_key(1, 3, 0));
        assert!(order_key(1, 10, 5) < order_key(2, 1, 0));
        assert!(order_line_key(1, 1, 256, 15) < order_line_key(1, 1, 257, 1));
        assert!(stock_key(1, 100_000) < stock_key(2, 1));
        assert_eq!(wd_key_id(&order_key(3, 4, 123_456)), 123_456);
        assert_eq!(
            order_customer_key_o_id(&order_customer_key(1, 2, 3, 4000)),
            4000
        );
        // Names: same last name contiguous, ordered by first name.
        let last = t("ABLEBAR");
        let k1 = customer_name_key(1, 1, &last, &t("Al"), 9);
        let k2 = customer_name_key(1, 1, &last, &t("Alice"), 1);
        let k3 = customer_name_key(1, 1, &last, &t("Bob"), 2);
        let other = customer_name_key(1, 1, &t("ABLEBARA"), &t("A"), 3);
        assert!(k1 < k2 && k2 < k3 && k3 < other);
        let (lo, hi) = customer_name_range(1, 1, &last);
        for k in [k1, k2, k3] {
            assert!(lo <= k && k <= hi);
        }
        assert!(other > hi);
        assert_eq!(customer_name_key_c_id(&k2), 1);
        assert!(history_key(1, (1 << 48) - 1) < history_key(2, 0));
        assert!(history_key(0, 5) < history_key(0, 6));
    }
}
