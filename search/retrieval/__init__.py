"""The steps of the hybrid search pipeline, each readable and testable on its own.
`search.selectors.search_memories` runs them in this order:

1. candidates: keyword and vector top-k for the team, then the missing score of each
   candidate (hybrid);
2. scoring: merge the two scores with the team's weights;
3. scoring: age decay and the rating nudge, then `min_score`;
4. mmr: diversify the top k;
5. skills: skills whose keyword is in the query go above the k results;
6. results: snippets, successors and annotations, as SearchResult rows.

The query's embedding (a network call to the provider) is not a step of this
pipeline: search.run_search makes it and hands the vector in.
"""
