"""The Nexmark queries written in EPL (the ones EPL expresses directly).

Each is (name, what it computes, statements); the last statement's rows are the query's.
Windows are in event time: the runtime clock follows each event's ``dateTime``.
q3 also selects the seller, its join key: a join split by its key numbers its rows per key.
q6 keeps each seller's last 10 sales with ``#groupwin(seller)#length(10)``. q15-q17 report
per day in Nexmark; here per 10 s tumbling window (``#time_batch`` from a reference point),
so that a run of 100,000 events (100 s of event time) closes several.
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
      "insert into Sold select C.seller as seller, "
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
]
