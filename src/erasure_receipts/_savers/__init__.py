"""The attesting savers: LangGraph's savers, each holding an eraser (the engine) built
from its database, journal and reader seams. Only how to reach the database is here."""
