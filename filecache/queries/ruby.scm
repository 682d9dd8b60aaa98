; ruby
