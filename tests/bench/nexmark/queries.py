"""The Nexmark queries written in EPL (the ones EPL expresses directly: not q10, a sink to
files, q11, session windows, q13, a side input, or q22, string splitting).

Each is (name, what it computes, statements); the last statement's rows are the query's.
Windows are in event time: the runtime clock follows each event's ``dateTime``.
q3 also selects the seller, its join key: a join split by its key numbers its rows per key.
q6 keeps each seller's last 10 sales with ``#groupwin(seller)#length(10)``; its sales also
carry the auction id, by which the statement making them is split (rows numbered per key).
q15-q17 report per day in Nexmark; here per 10 s tumbling window (``#time_batch`` from a
reference point), so that a run of 100,000 events (100 s of event time) closes several.
q9 joins each closed auction (as q4 closes them) with its qualifying bids and keeps the
highest (``having B.price = max(B.price)`` per auction; a tie keeps both). q12 and q15-q17
use the runtime clock, which here is event time (Nexmark's q12 counts in processing time).
q14's hour of day is ``(dateTime / 1000) % 24`` (a day of 24 s of event time, so that a run
crosses all three cases) and its price filter is scaled to the generator's prices; the
user function ``count_char`` is left out. q18 and q19 are retract streams in Nexmark:
here the insert and remove rows of ``#unique`` and ``#groupwin(auction)#sort``.
q21 has no channel id in the generator's URLs, so the case alone names it.
q5 outputs every auction's count, hottest first (the hot item is each snapshot's first
row): Esper 9 does not compile ``limit`` after ``order by`` with ``output snapshot`` over a
grouped ``#time`` window.
"""

from __future__ import annotations

QUERIES: list[tuple[str, str, tuple[str, ...]]] = [
    ("q0", "passthrough", ("select * from Bid",)),
    ("q1", "currency conversion",
     ("select auction, bidder, 0.908 * price as price, dateTime from Bid",)),
    ("q2", "selection",
     ("select auction, price from Bid(auction % 123 = 0)",)),
    ("q3", "local item suggestion (join Person/Auction)",
     ("select P.name as name, P.city as city, P.state as state, A.id as id, "
      "A.seller as seller "
      "from Auction(category = 10)#keepall as A, "
      "Person(state in ('OR', 'ID', 'CA'))#keepall as P where A.seller = P.id",)),
    ("q4", "average winning price per category (join + aggregation)",
     ("insert rstream into Closed select id, category, reserve, expires "
      "from Auction#time(10 sec)",
      "insert into Winning select C.id as auction, C.category as category, "
      "(select max(B.price) from Bid#time(20 sec) as B where B.auction = C.id "
      "and B.price >= C.reserve and B.dateTime < C.expires) as price from Closed as C",
      "select category, avg(price) as avgPrice from Winning(price is not null) "
      "group by category")),
    ("q5", "hot items (sliding #time window, output snapshot)",
     ("select auction, count(*) as num from Bid#time(10 sec) group by auction "
      "output snapshot every 2 sec order by num desc, auction",)),
    ("q6", "average selling price by seller (last 10 sales each)",
     ("insert rstream into Closed select id, seller, reserve, expires "
      "from Auction#time(10 sec)",
      "insert into Sold select C.id as auction, C.seller as seller, "
      "(select max(B.price) from Bid#time(20 sec) as B where B.auction = C.id "
      "and B.price >= C.reserve and B.dateTime < C.expires) as price from Closed as C",
      "select seller, avg(price) as avgPrice from Sold(price is not null)"
      "#groupwin(seller)#length(10) group by seller")),
    ("q7", "highest bid (#time_batch max)",
     ("select auction, bidder, price from Bid#time_batch(10 sec) "
      "having price = max(price)",)),
    ("q8", "monitor new users (join over time windows)",
     ("select P.id as id, P.name as name, A.reserve as reserve "
      "from Person#time_batch(10 sec) as P, Auction#time_batch(10 sec) as A "
      "where P.id = A.seller",)),
    ("q9", "winning bids (closed auctions joined with their bids)",
     ("insert rstream into Closed select id, seller, category, reserve, expires "
      "from Auction#time(10 sec)",
      "select C.id as auction, C.seller as seller, C.category as category, "
      "B.bidder as bidder, B.price as price, B.dateTime as bidTime "
      "from Closed as C unidirectional, Bid#time(20 sec) as B "
      "where B.auction = C.id and B.price >= C.reserve and B.dateTime < C.expires "
      "group by C.id having B.price = max(B.price)")),
    ("q12", "bids per bidder (10 s tumbling)",
     ("select bidder, count(*) as bids from Bid#time_batch(10 sec, 0L) group by bidder",)),
    ("q14", "calculation (case, arithmetic, filter)",
     ("select auction, bidder, 0.908 * price as price, "
      "case when (dateTime / 1000) % 24 between 8 and 18 then 'dayTime' "
      "when (dateTime / 1000) % 24 <= 6 or (dateTime / 1000) % 24 >= 20 "
      "then 'nightTime' else 'otherTime' end as bidTimeType, dateTime "
      "from Bid(0.908 * price > 10000 and 0.908 * price < 50000)",)),
    ("q15", "bidding statistics (count distinct, 10 s tumbling)",
     ("select count(*) as bids, count(distinct bidder) as bidders, "
      "count(distinct auction) as auctions from Bid#time_batch(10 sec, 0L)",)),
    ("q16", "channel statistics (group by channel, 10 s tumbling)",
     ("select channel, count(*) as bids, count(distinct bidder) as bidders, "
      "count(distinct auction) as auctions from Bid#time_batch(10 sec, 0L) "
      "group by channel",)),
    ("q17", "auction statistics (group by auction, 10 s tumbling)",
     ("select auction, count(*) as bids, min(price) as minPrice, max(price) as maxPrice, "
      "avg(price) as avgPrice, sum(price) as sumPrice "
      "from Bid#time_batch(10 sec, 0L) group by auction",)),
    ("q18", "last bid per bidder and auction (#unique, irstream)",
     ("select irstream auction, bidder, price, dateTime from Bid#unique(bidder, auction)",)),
    ("q19", "top 10 bids per auction (#groupwin #sort, irstream)",
     ("select irstream auction, bidder, price, dateTime "
      "from Bid#groupwin(auction)#sort(10, price desc)",)),
    ("q20", "expand bid with auction (join)",
     ("select B.auction as auction, B.bidder as bidder, B.price as price, "
      "A.itemName as itemName, A.category as category "
      "from Bid as B unidirectional, Auction(category = 10)#keepall as A "
      "where B.auction = A.id",)),
    ("q21", "add channel id (case)",
     ("select auction, bidder, price, channel, "
      "case channel when 'Apple' then '0' when 'Google' then '1' "
      "when 'Facebook' then '2' when 'Baidu' then '3' else 'other' end as channelId "
      "from Bid(channel in ('Apple', 'Google', 'Facebook', 'Baidu'))",)),
]
